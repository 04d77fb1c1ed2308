"""The real models of the misc TorchBench family (docs/zoo-tb-misc.md).

drq, soft_actor_critic, lennard_jones, the MAML learners and YOLOv3-SPP come
from repositories that are not on PyPI: each is re-stated here from its
module structure (the same modules, the same parameters). The two
differential-privacy cases are torchvision's resnet18 with group norm, as
the benchmarks build it (opacus' ModuleValidator.fix swaps every
BatchNorm2d for GroupNorm(min(32, C), C)).
"""


def _resnet18_gn(torch, classes):
    from torchvision import models
    nn = torch.nn
    return models.resnet18(num_classes=classes,
                           norm_layer=lambda c: nn.GroupNorm(min(32, c), c))


def _maml(torch, track):
    nn = torch.nn
    layers = []
    for c in (1, 64, 64):
        bn = (nn.BatchNorm2d(64, momentum=1, affine=True) if track
              else nn.BatchNorm2d(64, affine=True, track_running_stats=False))
        layers += [nn.Conv2d(c, 64, 3), bn, nn.ReLU(), nn.MaxPool2d(2, 2)]
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(64, 5))


def _mlp(nn, inp, hidden, out, depth):
    mods = [nn.Linear(inp, hidden), nn.ReLU()]
    for _ in range(depth - 1):
        mods += [nn.Linear(hidden, hidden), nn.ReLU()]
    return nn.Sequential(*mods, nn.Linear(hidden, out))


def drq(torch):
    """DrQ's Actor: the 4-conv pixel encoder (9 x 84 x 84 in, 32 x 35 x 35
    out), a linear to 50 and layer norm, the trunk 50-1024-1024-2."""
    nn = torch.nn

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.ModuleList([nn.Conv2d(9, 32, 3, stride=2)] +
                                       [nn.Conv2d(32, 32, 3) for _ in range(3)])
            self.head = nn.Sequential(nn.Linear(32 * 35 * 35, 50), nn.LayerNorm(50))
            self.trunk = _mlp(nn, 50, 1024, 2, 2)

    return Actor()


def soft_actor_critic(torch):
    """SAC's StochasticActor on Pendulum-v1: 3 - 1024 - 1024 - 2."""
    nn = torch.nn

    class StochasticActor(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(3, 1024)
            self.fc2 = nn.Linear(1024, 1024)
            self.fc3 = nn.Linear(1024, 2)

    return StochasticActor()


def lennard_jones(torch):
    nn = torch.nn
    return nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 1))


def pyhpc_isoneutral_mixing(torch):
    return torch.nn.Module()  # a function of its inputs: no parameters


def yolov3(torch):
    """YOLOv3-SPP (cfg/yolov3-spp.cfg, 80 classes): Darknet-53, SPP and three
    heads, every convolution but the heads' last conv + BN + leaky relu."""
    nn = torch.nn

    def cbl(cin, cout, k=1, s=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, (k - 1) // 2, bias=False),
                             nn.BatchNorm2d(cout), nn.LeakyReLU(0.1))

    def stage(cin, n):
        c = 2 * cin
        mods = [cbl(cin, c, 3, 2)]
        for _ in range(n):
            mods += [cbl(c, c // 2), cbl(c // 2, c, 3)]
        return nn.Sequential(*mods)

    out = 3 * 85
    backbone = [cbl(3, 32, 3)] + [stage(32 * 2 ** i, n) for i, n in enumerate((1, 2, 8, 8, 4))]
    head32 = [cbl(1024, 512), cbl(512, 1024, 3), cbl(1024, 512),  # then SPP
              cbl(2048, 512), cbl(512, 1024, 3), cbl(1024, 512), cbl(512, 1024, 3),
              nn.Conv2d(1024, out, 1)]
    head16 = [cbl(512, 256), cbl(768, 256), cbl(256, 512, 3), cbl(512, 256),
              cbl(256, 512, 3), cbl(512, 256), cbl(256, 512, 3), nn.Conv2d(512, out, 1)]
    head8 = [cbl(256, 128), cbl(384, 128), cbl(128, 256, 3), cbl(256, 128),
             cbl(128, 256, 3), cbl(256, 128), cbl(128, 256, 3), nn.Conv2d(256, out, 1)]
    return nn.ModuleList(backbone + head32 + head16 + head8)


MODELS = {
    "drq": drq,
    "functorch_dp_cifar10": lambda torch: _resnet18_gn(torch, 1000),
    "functorch_maml_omniglot": lambda torch: _maml(torch, False),
    "lennard_jones": lennard_jones,
    "maml_omniglot": lambda torch: _maml(torch, True),
    "opacus_cifar10": lambda torch: _resnet18_gn(torch, 10),
    "pyhpc_isoneutral_mixing": pyhpc_isoneutral_mixing,
    "soft_actor_critic": soft_actor_critic,
    "yolov3": yolov3,
}
