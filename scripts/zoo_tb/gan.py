"""TorchBench's GAN family, the modules its get_module() hands the harness,
re-stated from each repository's module structure (same layers, same
parameters): DCGAN's discriminator, CycleGAN's resnet_9blocks generator,
StarGAN's generator, LearningToPaint's actor and Background Matting's
ResnetConditionHR."""


def _seq(torch, *layers):
    return torch.nn.Sequential(*layers)


def dcgan(torch):
    nn, ndf = torch.nn, 64

    def down(i, o):
        return [nn.Conv2d(i, o, 4, 2, 1, bias=False), nn.BatchNorm2d(o), nn.LeakyReLU(0.2)]

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = _seq(torch, nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2),
                             *down(ndf, ndf * 2), *down(ndf * 2, ndf * 4),
                             *down(ndf * 4, ndf * 8), nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
                             nn.Sigmoid())
    return Discriminator()


def _resnet_block(torch, dim, norm, bias):
    nn = torch.nn
    return _seq(torch, nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=bias), norm(dim),
                nn.ReLU(), nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=bias), norm(dim))


def cyclegan(torch):
    nn, ngf = torch.nn, 64

    def norm(c):
        return nn.InstanceNorm2d(c, affine=False, track_running_stats=False)

    class ResnetGenerator(nn.Module):
        def __init__(self):
            super().__init__()
            m = [nn.ReflectionPad2d(3), nn.Conv2d(3, ngf, 7), norm(ngf), nn.ReLU()]
            for i in range(2):
                c = ngf * 2 ** i
                m += [nn.Conv2d(c, c * 2, 3, 2, 1), norm(c * 2), nn.ReLU()]
            m += [_resnet_block(torch, ngf * 4, norm, True) for _ in range(9)]
            for i in range(2):
                c = ngf * 2 ** (2 - i)
                m += [nn.ConvTranspose2d(c, c // 2, 3, 2, 1, output_padding=1), norm(c // 2),
                      nn.ReLU()]
            m += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, 3, 7), nn.Tanh()]
            self.model = _seq(torch, *m)
    return ResnetGenerator()


def stargan(torch):
    nn, d = torch.nn, 64

    def norm(c):
        return nn.InstanceNorm2d(c, affine=True, track_running_stats=True)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            m = [nn.Conv2d(3 + 5, d, 7, 1, 3, bias=False), norm(d), nn.ReLU()]
            c = d
            for _ in range(2):
                m += [nn.Conv2d(c, c * 2, 4, 2, 1, bias=False), norm(c * 2), nn.ReLU()]
                c *= 2
            m += [_seq(torch, nn.Conv2d(c, c, 3, 1, 1, bias=False), norm(c), nn.ReLU(),
                       nn.Conv2d(c, c, 3, 1, 1, bias=False), norm(c)) for _ in range(6)]
            for _ in range(2):
                m += [nn.ConvTranspose2d(c, c // 2, 4, 2, 1, bias=False), norm(c // 2), nn.ReLU()]
                c //= 2
            m += [nn.Conv2d(c, 3, 7, 1, 3, bias=False), nn.Tanh()]
            self.main = _seq(torch, *m)
    return Generator()


def learning_to_paint(torch):
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, i, o, stride):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(i, o, 3, stride, 1, bias=False), nn.BatchNorm2d(o)
            self.conv2, self.bn2 = nn.Conv2d(o, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o)
            self.shortcut = _seq(torch)
            if stride != 1 or i != o:
                self.shortcut = _seq(torch, nn.Conv2d(i, o, 1, stride, bias=False),
                                     nn.BatchNorm2d(o))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(9, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64)
            i, layers = 64, []
            for o in (64, 128, 256, 512):
                layers.append(_seq(torch, BasicBlock(i, o, 2), BasicBlock(o, o, 1)))
                i = o
            self.layer1, self.layer2, self.layer3, self.layer4 = layers
            self.fc = nn.Linear(512, 65)
    return ResNet()


def background_matting(torch):
    nn, ngf, nf = torch.nn, 64, 64
    bn = nn.BatchNorm2d

    def cbr(i, o, k=3, s=1, p=1, bias=True):
        return [nn.Conv2d(i, o, k, s, p, bias=bias), bn(o), nn.ReLU()]

    def encoder(cin):
        return _seq(torch, nn.ReflectionPad2d(3), *cbr(cin, ngf, 7, p=0),
                    *cbr(ngf, ngf * 2, s=2), *cbr(ngf * 2, ngf * 4, s=2))

    def up(i, o):
        return [nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), *cbr(i, o)]

    class ResnetConditionHR(nn.Module):
        def __init__(self):
            super().__init__()
            d = ngf * 4
            self.model_enc1 = _seq(torch, nn.ReflectionPad2d(3), *cbr(3, ngf, 7, p=0),
                                   *cbr(ngf, ngf * 2, s=2))
            self.model_enc2 = _seq(torch, *cbr(ngf * 2, d, s=2))
            self.model_enc_back, self.model_enc_seg = encoder(3), encoder(1)
            self.model_enc_multi = encoder(4)
            self.comb_back = _seq(torch, *cbr(2 * d, nf, 1, p=0, bias=False))
            self.comb_seg = _seq(torch, *cbr(2 * d, nf, 1, p=0, bias=False))
            self.comb_multi = _seq(torch, *cbr(2 * d, nf, 1, p=0, bias=False))
            self.model_res_dec = _seq(torch, *cbr(d + 3 * nf, d, 1, p=0, bias=False),
                                      *[_resnet_block(torch, d, bn, True) for _ in range(7)])
            self.model_res_dec_al = _seq(torch, *[_resnet_block(torch, d, bn, True)
                                                  for _ in range(3)])
            self.model_res_dec_fg = _seq(torch, *[_resnet_block(torch, d, bn, True)
                                                  for _ in range(3)])
            self.model_al_out = _seq(torch, *up(d, d // 2), *up(d // 2, ngf),
                                     nn.ReflectionPad2d(3), nn.Conv2d(ngf, 1, 7), nn.Tanh())
            self.model_dec_fg1 = _seq(torch, *up(d, ngf * 2))
            self.model_fg_out = _seq(torch, *up(d, ngf), nn.ReflectionPad2d(3),
                                     nn.Conv2d(ngf, 3, 7))
    return ResnetConditionHR()


MODELS = {
    "Background_Matting": background_matting,
    "LearningToPaint": learning_to_paint,
    "dcgan": dcgan,
    "pytorch_CycleGAN_and_pix2pix": cyclegan,
    "pytorch_stargan": stargan,
}
