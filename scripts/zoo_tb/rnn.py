"""Real counts of the rnn family (scripts/zoo_check.py --zoo torchbench).

tts_angular: Mozilla TTS's SpeakerEncoder as TorchBench vendors it
(LSTMWithProjection x 3: nn.LSTM then a bias-free nn.Linear).
doctr_reco_predictor: doctr's crnn_vgg16_bn (python-doctr is not installed
here): torchvision's vgg16_bn features with the last three max pools made
(2, 1), nn.LSTM(512, 128, 2 layers, bidirectional) and nn.Linear(256, 127),
the French vocabulary's 126 characters and the blank.
"""


def tts_angular(torch):
    nn = torch.nn

    class LSTMWithProjection(nn.Module):
        def __init__(self, i, h, p):
            super().__init__()
            self.lstm = nn.LSTM(i, h, batch_first=True)
            self.linear = nn.Linear(h, p, bias=False)

    class SpeakerEncoder(nn.Module):
        def __init__(self, i=40, p=256, h=768, n=3):
            super().__init__()
            self.layers = nn.Sequential(LSTMWithProjection(i, h, p),
                                        *[LSTMWithProjection(p, h, p) for _ in range(n - 1)])

    return SpeakerEncoder()


def doctr_reco_predictor(torch):
    import torchvision
    nn = torch.nn
    vgg = torchvision.models.vgg16_bn(weights=None)
    pools = [i for i, m in enumerate(vgg.features) if isinstance(m, nn.MaxPool2d)]
    for i in pools[-3:]:
        vgg.features[i] = nn.MaxPool2d((2, 1))

    class CRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.feat_extractor = vgg.features
            self.decoder = nn.LSTM(512, 128, batch_first=True, num_layers=2, bidirectional=True)
            self.linear = nn.Linear(256, 127)

    return CRNN()


MODELS = {"doctr_reco_predictor": doctr_reco_predictor, "tts_angular": tts_angular}
