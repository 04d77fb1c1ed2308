"""Real counts for the U-Net family of the TorchBench list (docs/zoo.md):
milesial's Pytorch-UNet, Super SloMo and doctr's db_resnet50. Neither
repository is on PyPI in the study's form, so each is re-stated here from
its module structure with the same parameters; torchvision supplies the
backbones (resnet50, vgg16)."""


def _unet_milesial(torch):
    nn = torch.nn

    def double(i, o, mid=None):
        mid = mid or o
        return nn.Sequential(nn.Conv2d(i, mid, 3, padding=1), nn.BatchNorm2d(mid), nn.ReLU(),
                             nn.Conv2d(mid, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

    # UNet(n_channels=3, n_classes=2, bilinear=True): the deepest level halved
    return nn.ModuleList([
        double(3, 64), double(64, 128), double(128, 256), double(256, 512), double(512, 512),
        double(1024, 256, 512), double(512, 128, 256), double(256, 64, 128), double(128, 64, 64),
        nn.Conv2d(64, 2, 1)])


def _slomo_unet(torch, cin, cout):
    nn = torch.nn
    mods = [nn.Conv2d(cin, 32, 7, padding=3), nn.Conv2d(32, 32, 7, padding=3)]
    for i, o, k in [(32, 64, 5), (64, 128, 3), (128, 256, 3), (256, 512, 3), (512, 512, 3)]:
        mods += [nn.Conv2d(i, o, k, padding=k // 2), nn.Conv2d(o, o, k, padding=k // 2)]
    for i, o in [(512, 512), (512, 256), (256, 128), (128, 64), (64, 32)]:
        mods += [nn.Conv2d(i, o, 3, padding=1), nn.Conv2d(2 * o, o, 3, padding=1)]
    mods.append(nn.Conv2d(32, cout, 3, padding=1))
    return nn.ModuleList(mods)


def super_slomo(torch):
    import torchvision
    vgg = torchvision.models.vgg16().features[:22]  # conv4_3 and its ReLU
    return torch.nn.ModuleList([_slomo_unet(torch, 6, 4), _slomo_unet(torch, 20, 5), vgg])


def db_resnet50(torch):
    import torchvision
    from torchvision.models._utils import IntermediateLayerGetter
    nn = torch.nn
    backbone = IntermediateLayerGetter(torchvision.models.resnet50(),
                                       {"layer%d" % i: str(i - 1) for i in range(1, 5)})
    head = 256
    fpn_in = nn.ModuleList([nn.Sequential(nn.Conv2d(c, head, 1, bias=False), nn.BatchNorm2d(head))
                            for c in (256, 512, 1024, 2048)])
    fpn_out = nn.ModuleList([nn.Sequential(nn.Conv2d(head, head // 4, 3, padding=1, bias=False),
                                           nn.BatchNorm2d(head // 4)) for _ in range(4)])

    def db_head():
        q = head // 4
        return nn.Sequential(nn.Conv2d(head, q, 3, padding=1, bias=False), nn.BatchNorm2d(q),
                             nn.ConvTranspose2d(q, q, 2, stride=2, bias=False), nn.BatchNorm2d(q),
                             nn.ConvTranspose2d(q, 1, 2, stride=2))

    return nn.ModuleList([backbone, fpn_in, fpn_out, db_head(), db_head()])


MODELS = {
    "Super_SloMo": super_slomo,
    "doctr_det_predictor": db_resnet50,
    "pytorch_unet": _unet_milesial,
}
