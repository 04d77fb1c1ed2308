"""TorchBench's torchvision classics, its timm_* models and the two models
of Phillip Lippe's CIFAR-10 tutorials, as builder(torch) -> nn.Module.

The torchvision and timm ones are the libraries' constructors at
TorchBench's arguments; the tutorial models are re-stated here from their
module structure (same layers, same parameters)."""


def _tv(name):
    def build(torch):
        import torchvision
        return getattr(torchvision.models, name)()
    return build


def _timm(name):
    def build(torch):
        import timm
        # TorchBench's create_model arguments; timm drops the None ones
        return timm.create_model(name, in_chans=3, num_classes=None, drop_rate=0.0,
                                 drop_path_rate=None, drop_block_rate=None)
    return build


def phlippe_densenet(torch):
    """DenseNet(num_classes 10, layers [6, 6, 6, 6], bn_size 2, growth 16, ReLU)."""
    nn = torch.nn
    growth, bn_size, layers, classes = 16, 2, [6, 6, 6, 6], 10

    class DenseLayer(nn.Module):
        def __init__(self, c_in):
            super().__init__()
            self.net = nn.Sequential(
                nn.BatchNorm2d(c_in), nn.ReLU(),
                nn.Conv2d(c_in, bn_size * growth, 1, bias=False),
                nn.BatchNorm2d(bn_size * growth), nn.ReLU(),
                nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False))

        def forward(self, x):
            return torch.cat([self.net(x), x], dim=1)

    c = growth * bn_size
    mods = [nn.Conv2d(3, c, 3, padding=1)]
    for i, n in enumerate(layers):
        mods += [DenseLayer(c + k * growth) for k in range(n)]
        c += n * growth
        if i < len(layers) - 1:
            mods += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                     nn.AvgPool2d(2, 2)]
            c //= 2
    mods += [nn.BatchNorm2d(c), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
             nn.Linear(c, classes)]
    return nn.Sequential(*mods)


def phlippe_resnet(torch):
    """ResNetModel(num_classes 10, blocks [3, 3, 3], widths 16, 32, 64, ReLU)."""
    nn = torch.nn
    widths, blocks, classes = [16, 32, 64], [3, 3, 3], 10

    class Block(nn.Module):
        def __init__(self, c_in, c_out, subsample):
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv2d(c_in, c_out, 3, padding=1, stride=2 if subsample else 1, bias=False),
                nn.BatchNorm2d(c_out), nn.ReLU(),
                nn.Conv2d(c_out, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out))
            self.downsample = nn.Conv2d(c_in, c_out, 1, stride=2) if subsample else None

        def forward(self, x):
            z = self.net(x)
            if self.downsample is not None:
                x = self.downsample(x)
            return torch.relu(z + x)

    mods = [nn.Conv2d(3, widths[0], 3, padding=1, bias=False), nn.BatchNorm2d(widths[0]),
            nn.ReLU()]
    for g, n in enumerate(blocks):
        for b in range(n):
            sub = b == 0 and g > 0
            mods.append(Block(widths[g - 1] if sub else widths[g], widths[g], sub))
    mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(widths[-1], classes)]
    return nn.Sequential(*mods)


MODELS = {
    "alexnet": _tv("alexnet"),
    "densenet121": _tv("densenet121"),
    "mnasnet1_0": _tv("mnasnet1_0"),
    "mobilenet_v2": _tv("mobilenet_v2"),
    "mobilenet_v3_large": _tv("mobilenet_v3_large"),
    "phlippe_densenet": phlippe_densenet,
    "phlippe_resnet": phlippe_resnet,
    "resnet152": _tv("resnet152"),
    "resnet18": _tv("resnet18"),
    "resnet50": _tv("resnet50"),
    "resnext50_32x4d": _tv("resnext50_32x4d"),
    "shufflenet_v2_x1_0": _tv("shufflenet_v2_x1_0"),
    "squeezenet1_1": _tv("squeezenet1_1"),
    "vgg16": _tv("vgg16"),
    "timm_efficientnet": _timm("efficientnet_b0"),
    "timm_regnet": _timm("regnety_120"),
    "timm_resnest": _timm("resnest14d"),
    "timm_vision_transformer": _timm("vit_small_patch16_224"),
    "timm_vision_transformer_large": _timm("vit_giant_patch14_224"),
    "timm_vovnet": _timm("vovnet39a"),
}
