#!/usr/bin/env python3
"""The zoo's parameter checker (docs/zoo.md): the real models' counts.

Builds each Hugging Face model of the study's list on PyTorch's `meta`
device, which allocates nothing, at the study harness's configuration, and
prints its parameter count (tied weights counted once, as
`model.parameters()` yields them):

    python3 scripts/zoo_check.py                  # name, class, real count
    python3 scripts/zoo_check.py --tcbench build/tcbench
                                                  # and a Markdown table for docs/zoo.md:
                                                  # tcbench's count beside the real one

Optional, not part of the build or CI: it needs torch and transformers from
PyPI (requirements-zoo.txt). Nothing is downloaded. The configuration is the
model class's defaults (`config_class()`), except for the models the
harness names by checkpoint; those configurations are written out below
from the checkpoints' published config.json values, by hand, so that no
network is needed. A class this transformers lacks (Speech2Text2 left in
5.0) is reported as unavailable, and the exit status is then 1.

    python3 scripts/zoo_check.py --zoo timm [--tcbench build/cli/tcbench]

does the same for the TIMM list with timm's `create_model(name)` (its
defaults: 1000 classes). Old names resolve through timm's own renames
(adv_inception_v3 is inception_v3.tf_adv_in1k). gluon_xception65 left timm
in 0.9; this timm reports it unknown (exit status 1), and its count comes
from timm 0.6.13 on the path instead (PYTHONPATH=DIR after
`pip install --no-deps --target DIR timm==0.6.13`, `--only gluon_xception65`).

    python3 scripts/zoo_check.py --zoo torchbench [--tcbench build/cli/tcbench]

the TorchBench list (needs torchvision too). TorchBench itself is not on
PyPI: each model's real count comes from a builder in scripts/zoo_tb/, one
module per family, whose MODELS maps a case name to a function of torch
returning the module at TorchBench's configuration: torchvision's and
timm's constructors, transformers' classes with the configurations
TorchBench passes, and for the models from other repositories a
re-statement of their module structure, written here from their sources.
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
# The study's Hugging Face list (name,batch), as its harness has it: the
# study's 46 and 7 more (docs/zoo.md)
STUDY_LIST = [
    "AlbertForMaskedLM,8",
    "AlbertForQuestionAnswering,8",
    "AllenaiLongformerBase,1",
    "BartForCausalLM,16",
    "BartForConditionalGeneration,4",
    "BertForMaskedLM,128",
    "BertForQuestionAnswering,128",
    "BigBird,1",
    "BlenderbotForCausalLM,32",
    "BlenderbotForConditionalGeneration,32",
    "BlenderbotSmallForCausalLM,128",
    "BlenderbotSmallForConditionalGeneration,128",
    "CamemBert,1",
    "DebertaForMaskedLM,32",
    "DebertaForQuestionAnswering,32",
    "DebertaV2ForMaskedLM,8",
    "DebertaV2ForQuestionAnswering,8",
    "DistilBertForMaskedLM,64",
    "DistilBertForQuestionAnswering,64",
    "DistillGPT2,1",
    "ElectraForCausalLM,64",
    "ElectraForQuestionAnswering,128",
    "GPT2ForSequenceClassification,8",
    "GPTJForCausalLM,1",
    "GPTJForQuestionAnswering,1",
    "GPTNeoForCausalLM,8",
    "GPTNeoForSequenceClassification,8",
    "GoogleFnet,1",
    "LayoutLMForMaskedLM,32",
    "LayoutLMForSequenceClassification,32",
    "M2M100ForConditionalGeneration,8",
    "MBartForCausalLM,32",
    "MBartForConditionalGeneration,16",
    "MT5ForConditionalGeneration,8",
    "MegatronBertForCausalLM,16",
    "MegatronBertForQuestionAnswering,16",
    "MobileBertForMaskedLM,32",
    "MobileBertForQuestionAnswering,64",
    "OPTForCausalLM,32",
    "PLBartForCausalLM,32",
    "PLBartForConditionalGeneration,16",
    "PegasusForCausalLM,32",
    "PegasusForConditionalGeneration,16",
    "Reformer,1",
    "RobertaForCausalLM,128",
    "RobertaForQuestionAnswering,128",
    "Speech2Text2ForCausalLM,128",
    "T5ForConditionalGeneration,8",
    "T5Small,1",
    "TrOCRForCausalLM,32",
    "XGLMForCausalLM,8",
    "XLNetLMHeadModel,128",
    "YituTechConvBert,1",
]
# The study's TIMM list: its 61 and gluon_xception65, which it dropped
TIMM_LIST = [
    "adv_inception_v3", "beit_base_patch16_224", "botnet26t_256", "cait_m36_384", "coat_lite_mini",
    "convit_base", "convmixer_768_32", "convnext_base", "crossvit_9_240", "cspdarknet53",
    "deit_base_distilled_patch16_224", "dla102", "dm_nfnet_f0", "dpn107", "eca_botnext26ts_256",
    "eca_halonext26ts", "ese_vovnet19b_dw", "fbnetc_100", "fbnetv3_b", "gernet_l", "ghostnet_100",
    "gluon_inception_v3", "gluon_xception65", "gmixer_24_224", "gmlp_s16_224", "hrnet_w18",
    "inception_v3", "jx_nest_base", "lcnet_050", "levit_128", "mixer_b16_224", "mixnet_l",
    "mnasnet_100", "mobilenetv2_100", "mobilenetv3_large_100", "mobilevit_s", "nfnet_l0",
    "pit_b_224", "pnasnet5large", "poolformer_m36", "regnety_002", "repvgg_a2",
    "res2net101_26w_4s", "res2net50_14w_8s", "res2next50", "resmlp_12_224", "resnest101e",
    "rexnet_100", "sebotnet33ts_256", "selecsls42b", "spnasnet_100",
    "swin_base_patch4_window7_224", "swsl_resnext101_32x16d", "tf_efficientnet_b0", "tf_mixnet_l",
    "tinynet_a", "tnt_s_patch16_224", "twins_pcpvt_base", "visformer_small",
    "vit_base_patch16_224", "volo_d1_224", "xcit_large_24_p8_224",
]
# The study's TorchBench list, as reference/torchbench-models.txt has it
TB_LIST = [
    "BERT_pytorch", "Background_Matting", "LearningToPaint", "Super_SloMo", "alexnet",
    "attention_is_all_you_need_pytorch", "dcgan", "densenet121", "dlrm", "doctr_det_predictor",
    "doctr_reco_predictor", "drq", "fastNLP_Bert", "functorch_dp_cifar10",
    "functorch_maml_omniglot", "hf_Albert", "hf_Bart", "hf_Bert", "hf_Bert_large",
    "hf_DistilBert", "hf_GPT2", "hf_Reformer", "hf_T5_large", "lennard_jones", "maml_omniglot",
    "mnasnet1_0", "mobilenet_v2", "mobilenet_v3_large", "nvidia_deeprecommender",
    "opacus_cifar10", "phlippe_densenet", "phlippe_resnet", "pyhpc_isoneutral_mixing",
    "pytorch_CycleGAN_and_pix2pix", "pytorch_stargan", "pytorch_unet", "resnet152", "resnet18",
    "resnet50", "resnext50_32x4d", "shufflenet_v2_x1_0", "soft_actor_critic",
    "speech_transformer", "squeezenet1_1", "timm_efficientnet", "timm_regnet", "timm_resnest",
    "timm_vision_transformer", "timm_vision_transformer_large", "timm_vovnet", "tts_angular",
    "vgg16", "yolov3",
]
RULE = 0.005  # ZOO.md: within 0.5% of the real class's count


def checkpoint_configs(t):
    """The harness's models named by checkpoint: (model class, config).

    Each config is the checkpoint's config.json where it differs from the
    class's defaults; the rest stay the defaults."""
    return {
        # t5-small: the T5Config defaults are t5-small's dimensions
        # (d_model 512, d_ff 2048, 6 layers, 8 heads, vocab 32128)
        "T5Small": ("T5ForConditionalGeneration", lambda: t.T5Config(
            d_model=512, d_ff=2048, d_kv=64, num_layers=6, num_heads=8, vocab_size=32128)),
        # distilgpt2: GPT-2 with 6 layers
        "DistillGPT2": ("GPT2LMHeadModel", lambda: t.GPT2Config(n_layer=6)),
        # google/fnet-base: vocab 32000, 4 token types, 512 positions
        "GoogleFnet": ("FNetForMaskedLM", lambda: t.FNetConfig(
            vocab_size=32000, hidden_size=768, num_hidden_layers=12, intermediate_size=3072,
            max_position_embeddings=512, type_vocab_size=4)),
        # YituTech/conv-bert-base
        "YituTechConvBert": ("ConvBertForMaskedLM", lambda: t.ConvBertConfig(
            vocab_size=30522, hidden_size=768, embedding_size=768, num_hidden_layers=12,
            num_attention_heads=12, intermediate_size=3072, head_ratio=2, conv_kernel_size=9,
            num_groups=1, max_position_embeddings=512, type_vocab_size=2)),
        # camembert-base: a RoBERTa with a 32005-token vocabulary
        "CamemBert": ("CamembertForMaskedLM", lambda: t.CamembertConfig(
            vocab_size=32005, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072, max_position_embeddings=514, type_vocab_size=1,
            pad_token_id=1, bos_token_id=5, eos_token_id=6)),
        # allenai/longformer-base-4096
        "AllenaiLongformerBase": ("LongformerForMaskedLM", lambda: t.LongformerConfig(
            vocab_size=50265, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072, max_position_embeddings=4098, type_vocab_size=1,
            attention_window=[512] * 12, pad_token_id=1, bos_token_id=0, eos_token_id=2)),
        # google/bigbird-roberta-base: the BigBirdConfig defaults, block-sparse
        "BigBird": ("BigBirdForMaskedLM", lambda: t.BigBirdConfig(attention_type="block_sparse")),
        # the harness's Reformer: ReformerConfig() under a masked-LM head
        "Reformer": ("ReformerForMaskedLM", lambda: t.ReformerConfig()),
    }


def real_count(t, torch, name):
    """(class name, parameter count) of one model of the list; count None
    with the reason as the class name when it cannot be built here."""
    special = checkpoint_configs(t)
    if name in special:
        cls_name, make_config = special[name]
    else:
        cls_name, make_config = name, None
    cls = getattr(t, cls_name, None)
    if cls is None:
        return cls_name, None, "transformers %s has no %s" % (t.__version__, cls_name)
    config = make_config() if make_config else cls.config_class()
    with torch.device("meta"):
        model = cls(config)
    return cls_name, sum(p.numel() for p in model.parameters()), ""


def timm_count(timm, torch, name):
    """timm.create_model(name) as the harness builds it (defaults, 1000
    classes), on the meta device: (module class, count, why)."""
    try:
        with torch.device("meta"):
            model = timm.create_model(name)
    except Exception as e:  # an unknown name in this timm
        return "-", None, "timm %s: %s" % (timm.__version__, str(e).splitlines()[0])
    return type(model).__name__, sum(p.numel() for p in model.parameters()), ""


def tb_builders():
    """case name -> builder(torch) from every module of scripts/zoo_tb/."""
    import glob
    import importlib.util
    builders = {}
    for path in sorted(glob.glob(os.path.join(HERE, "zoo_tb", "*.py"))):
        spec = importlib.util.spec_from_file_location("zoo_tb_" + os.path.basename(path)[:-3], path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for name, fn in getattr(mod, "MODELS", {}).items():
            if name in builders:
                sys.exit("zoo_check: %s is built by two modules of scripts/zoo_tb/" % name)
            builders[name] = fn
    return builders


def tb_count(builders, torch, name):
    """TorchBench's model NAME on the meta device: (module class, count, why)."""
    fn = builders.get(name)
    if fn is None:
        return "-", None, "no builder in scripts/zoo_tb/"
    try:
        with torch.device("meta"):
            model = fn(torch)
    except Exception as e:  # a library this machine lacks, or too old
        return "-", None, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    return type(model).__name__, sum(p.numel() for p in model.parameters()), ""


def read_list(path, default=STUDY_LIST):
    lines = open(path).read().split() if path else default
    return [line.split(",")[0] for line in lines]


def tcbench_counts(exe, suite):
    """case -> exact count ("-" for a model not built yet) of `tcbench list`."""
    out = subprocess.run([exe, "list", "--exact", suite], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("tcbench list %s: %s" % (suite, out.stderr.strip() or out.returncode))
    counts = {}
    for line in out.stdout.splitlines()[1:]:
        f = line.split()
        if len(f) >= 3:
            counts[f[0]] = f[-2]  # the params column may hold spaces; count is next to last
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", help="another list of names (name,batch per line)")
    ap.add_argument("--tcbench", metavar="PATH", help="compare with `PATH list SUITE`")
    ap.add_argument("--zoo", choices=["huggingface", "timm", "torchbench"],
                    default="huggingface",
                    help="which list: the Hugging Face models (transformers), TIMM's (timm) "
                    "or TorchBench's (scripts/zoo_tb/)")
    ap.add_argument("--suite", help="the suite to list (default: suites/ZOO.yaml)")
    ap.add_argument("--only", help="comma-separated names of the list")
    args = ap.parse_args()
    suite = args.suite or os.path.join(SOURCE, "suites", args.zoo + ".yaml")
    try:
        import torch
        if args.zoo == "timm":
            import timm
            count = lambda name: timm_count(timm, torch, name)
        elif args.zoo == "torchbench":
            builders = tb_builders()
            count = lambda name: tb_count(builders, torch, name)
        else:
            import transformers as t
            t.logging.set_verbosity_error()
            count = lambda name: real_count(t, torch, name)
    except ImportError as e:
        sys.exit("zoo_check: %s; pip install -r requirements-zoo.txt" % e)
    lists = {"huggingface": STUDY_LIST, "timm": TIMM_LIST, "torchbench": TB_LIST}
    models = read_list(args.list, lists[args.zoo])
    if args.only:
        want = set(args.only.split(","))
        models = [m for m in models if m in want]
    ours = tcbench_counts(args.tcbench, suite) if args.tcbench else None
    status = 0
    if ours is None:
        print("%-42s %-40s %14s" % ("model", "class", "params (real)"))
    else:
        print("| model | class | params (tcbench) | params (real) | difference |")
        print("| --- | --- | ---: | ---: | ---: |")
    for name in models:
        cls_name, real, why = count(name)
        if real is None:
            status = 1
        if ours is None:
            print("%-42s %-40s %14s" % (name, cls_name, "{:,}".format(real) if real else why))
            continue
        mine = ours.get(name)
        if mine is None:
            diff, status = "no case in the suite", 1
        elif mine == "-":
            diff = "not built yet"
        elif real is None:
            diff = why
        else:
            rel = (int(mine) - real) / real
            diff = "%+.3f%%" % (100 * rel)
            if abs(rel) > RULE:
                diff += " (over 0.5%)"
                status = 1
        mine_s = "-" if mine in (None, "-") else "{:,}".format(int(mine))
        real_s = "{:,}".format(real) if real else "-"
        print("| %s | %s | %s | %s | %s |" % (name, cls_name, mine_s, real_s, diff))
    return status


if __name__ == "__main__":
    sys.exit(main())
