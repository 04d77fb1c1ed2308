"""TorchBench's recommendation models (dlrm, nvidia_deeprecommender) at the
configurations their __init__.py files set, restated from their module
structure (TorchBench is not on PyPI): the modules and parameter shapes of
DLRM_Net (dlrm_s_pytorch.py) and of DeepRecommender's AutoEncoder
(reco_encoder/model/model.py)."""


def dlrm(torch):
    nn = torch.nn

    def mlp(sizes):
        layers = []
        for n, m in zip(sizes, sizes[1:]):
            layers += [nn.Linear(n, m, bias=True), nn.ReLU()]  # sigmoid_* is -1: ReLU only
        return nn.Sequential(*layers)

    class DLRM(nn.Module):
        def __init__(self):
            super().__init__()
            m_spa, tables, rows = 64, 8, 1000000
            self.emb_l = nn.ModuleList(
                nn.EmbeddingBag(rows, m_spa, mode="sum", sparse=True) for _ in range(tables))
            self.bot_l = mlp([512, 512, 64])
            features = tables + 1
            self.top_l = mlp([features * (features - 1) // 2 + 64, 1024, 1024, 1024, 1])

    return DLRM()


def deeprecommender(torch):
    nn = torch.nn

    class AutoEncoder(nn.Module):
        def __init__(self, sizes):
            super().__init__()
            self.encode_w = nn.ParameterList(
                nn.Parameter(torch.empty(sizes[i + 1], sizes[i])) for i in range(len(sizes) - 1))
            self.encode_b = nn.ParameterList(
                nn.Parameter(torch.zeros(sizes[i + 1])) for i in range(len(sizes) - 1))
            back = list(reversed(sizes))
            self.decode_w = nn.ParameterList(  # constrained is False: weights of their own
                nn.Parameter(torch.empty(back[i + 1], back[i])) for i in range(len(back) - 1))
            self.decode_b = nn.ParameterList(
                nn.Parameter(torch.zeros(back[i + 1])) for i in range(len(back) - 1))
            self.drop = nn.Dropout(0.8)

    return AutoEncoder([197951, 512, 512, 1024])


MODELS = {"dlrm": dlrm, "nvidia_deeprecommender": deeprecommender}
