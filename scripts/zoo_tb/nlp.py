"""TorchBench's NLP models for zoo_check.py --zoo torchbench: the Hugging
Face ones from transformers with TorchBench's configurations (written out:
the checks run without the Hub), the repository models re-stated as module
trees with the repositories' parameters (their code is not on PyPI)."""


def _hf(cls_name, config_name, **kw):
    def build(torch):
        import transformers as t
        t.logging.set_verbosity_error()
        return getattr(t, cls_name)(getattr(t, config_name)(**kw))
    return build


def _encoder_layer(nn, d, ffn, attn_bias=True, post_norm=True, eps=1e-5):
    """A Transformer layer's parameters: q, k, v, o, two norms, two linears."""
    m = nn.Module()
    m.q, m.k, m.v, m.o = (nn.Linear(d, d, bias=attn_bias) for _ in range(4))
    m.norm1, m.norm2 = nn.LayerNorm(d, eps=eps), nn.LayerNorm(d, eps=eps)
    m.w1, m.w2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
    return m


def _decoder_layer(nn, d, ffn, attn_bias=True, eps=1e-5):
    m = _encoder_layer(nn, d, ffn, attn_bias, eps=eps)
    m.cq, m.ck, m.cv, m.co = (nn.Linear(d, d, bias=attn_bias) for _ in range(4))
    m.norm3 = nn.LayerNorm(d, eps=eps)
    return m


def bert_pytorch(torch):
    # codertimo's BERTLM: token (19860) and segment (3) embeddings, a
    # sinusoidal buffer, 12 layers (LayerNorm's a_2, b_2 per sublayer), the
    # next-sentence and masked-LM linears
    nn, V, d = torch.nn, 19860, 768
    m = nn.Module()
    m.token, m.segment = nn.Embedding(V, d), nn.Embedding(3, d)
    m.layers = nn.ModuleList(_encoder_layer(nn, d, 4 * d) for _ in range(12))
    m.next_sentence, m.mask_lm = nn.Linear(d, 2), nn.Linear(d, V)
    return m


def attention_is_all_you_need(torch):
    # jadore801120's Transformer, 9521 tokens each side, untied, no biases
    # in attention, a LayerNorm after each side's embeddings
    nn, V, d = torch.nn, 9521, 512
    m = nn.Module()
    m.src_emb, m.trg_emb = nn.Embedding(V, d), nn.Embedding(V, d)
    m.enc_norm, m.dec_norm = nn.LayerNorm(d), nn.LayerNorm(d)
    m.enc = nn.ModuleList(_encoder_layer(nn, d, 2048, attn_bias=False) for _ in range(6))
    m.dec = nn.ModuleList(_decoder_layer(nn, d, 2048, attn_bias=False) for _ in range(6))
    m.prj = nn.Linear(d, V, bias=False)
    return m


def fastnlp_bert(torch):
    # fastNLP's BertModel from TorchBench's bert_config.json (pooler
    # included) and BertForQuestionAnswering's qa_outputs
    nn, V, d = torch.nn, 21128, 768
    m = nn.Module()
    m.words, m.positions, m.types = nn.Embedding(V, d), nn.Embedding(512, d), nn.Embedding(2, d)
    m.emb_norm = nn.LayerNorm(d)
    m.layers = nn.ModuleList(_encoder_layer(nn, d, 3072) for _ in range(12))
    m.pooler, m.qa_outputs = nn.Linear(d, d), nn.Linear(d, 2)
    return m


def speech_transformer(torch):
    # kaituoxu's Speech-Transformer at TorchBench's config.py: linear_in from
    # 80 x 4 stacked features, 4233 characters, the projection tied
    nn, V, d = torch.nn, 4233, 512
    m = nn.Module()
    m.linear_in, m.norm_in = nn.Linear(320, d), nn.LayerNorm(d)
    m.enc = nn.ModuleList(_encoder_layer(nn, d, 2048) for _ in range(6))
    m.emb = nn.Embedding(V, d)
    m.dec = nn.ModuleList(_decoder_layer(nn, d, 2048) for _ in range(6))
    m.prj = nn.Linear(d, V, bias=False)
    m.prj.weight = m.emb.weight
    return m


MODELS = {
    "BERT_pytorch": bert_pytorch,
    "attention_is_all_you_need_pytorch": attention_is_all_you_need,
    "fastNLP_Bert": fastnlp_bert,
    "hf_Albert": _hf("AlbertForMaskedLM", "AlbertConfig", vocab_size=30000, embedding_size=128,
                     hidden_size=768, num_attention_heads=12, intermediate_size=3072),
    "hf_Bart": _hf("BartForConditionalGeneration", "BartConfig", vocab_size=50265, d_model=768,
                   encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
                   decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072),
    "hf_Bert": _hf("BertForMaskedLM", "BertConfig"),
    "hf_Bert_large": _hf("BertForMaskedLM", "BertConfig", hidden_size=1024,
                         num_hidden_layers=24, num_attention_heads=16),
    "hf_DistilBert": _hf("DistilBertForMaskedLM", "DistilBertConfig"),
    "hf_GPT2": _hf("GPT2LMHeadModel", "GPT2Config"),
    "hf_Reformer": _hf("ReformerForMaskedLM", "ReformerConfig", num_buckets=128, is_decoder=False),
    "hf_T5_large": _hf("T5ForConditionalGeneration", "T5Config", d_model=1024, d_ff=4096,
                       num_layers=24, num_heads=16, d_kv=64),
    "speech_transformer": speech_transformer,
}
