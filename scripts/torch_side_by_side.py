#!/usr/bin/env python3
"""tcbench's YAML models in PyTorch, on tcbench's own weights (docs/torch.md).

    tcbench weights suites/smoke.yaml -o weights/
    python scripts/torch_side_by_side.py suites/smoke.yaml weights/ [--only gpt2,bert]
        [--size NAME] [--threads 2] [--time [--precision fp32,amp]] [-o results/torch.json]

Builds each case's model as a torch.nn.Module layer by layer from the same
suite and model YAML (docs/yaml.md), with parameter and buffer names equal to
tcbench's, loads WEIGHTS/CASE.safetensors (written by `tcbench weights`) and
checks PyTorch eager against it:

- inference (eval mode, fp32): each output against output.K, relative L2
  error at most 1e-4;
- one training step (train mode): the loss (the model's `loss:` or the
  suite's `output_mean`) against train.loss and every parameter's gradient
  against train.grad.NAME, relative L2 error at most 1e-3.

With --time it also times PyTorch eager and torch.compile (Inductor, default
mode), inference and one training step, in fp32 and/or AMP (float16
autocast, as tcbench's), as interleaved rounds by tcbench's measuring rules, and writes
the entries (modes `torch-eager`, `torch-compile`) in tcbench's results
schema (docs/results-schema.md).

Optional: needs torch, numpy, safetensors and PyYAML (requirements-torch.txt).
Nothing in tcbench's build or tests depends on it.
"""
import argparse
import contextlib
import json
import math
import os
import platform
import re
import socket
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml

VERSION = "0.1.0"
TOL_INFER = 1e-4
TOL_TRAIN = 1e-3
GRAD_FLOOR = 1e-3  # see check_case


class BuildError(Exception):
    """A model or suite this builder cannot read or build."""


class Unsupported(BuildError):
    """A layer (or key) tcbench knows that this builder does not build yet."""


# ------------------------------------------------------------------ YAML

class Quoted(str):
    """A quoted YAML scalar: a word unless it holds '$' (docs/yaml.md)."""


class _Loader(yaml.SafeLoader):
    """YAML as tcbench reads it: every scalar is text (classified below) but
    true/false and null; a quoted scalar stays marked as such."""


_Loader.yaml_implicit_resolvers = {}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool",
                              re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:null",
                              re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])


def _construct_str(loader, node):
    v = loader.construct_scalar(node)
    return Quoted(v) if node.style in ('"', "'") else v


_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=_Loader)


# ------------------------------------------------------------------ expressions

_TOKEN = re.compile(r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|\$(?P<var>[A-Za-z0-9_]+)"
                    r"|(?P<op>[-+*/()]))")


def parse_expr(text):
    """Parses tcbench's expression syntax into a tree, or returns None."""
    toks, pos, text = [], 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            return None
        pos = m.end()
        if m.group("num") is not None:
            s = m.group("num")
            toks.append(("num", int(s) if re.fullmatch(r"\d+", s) else float(s)))
        elif m.group("var") is not None:
            toks.append(("var", m.group("var")))
        else:
            toks.append(("op", m.group("op")))
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if not toks:
        return None
    i = 0

    def peek():
        return toks[i] if i < len(toks) else (None, None)

    def primary():
        nonlocal i
        k, v = peek()
        if k == "num" or k == "var":
            i += 1
            return (k, v)
        if (k, v) == ("op", "-"):
            i += 1
            return ("neg", primary())
        if (k, v) == ("op", "("):
            i += 1
            e = sum_()
            if peek() != ("op", ")"):
                raise ValueError("expected ')'")
            i += 1
            return e
        raise ValueError("unexpected token")

    def level(operand, ops):
        # operand (op operand)*, left to right, for the operators in ops
        nonlocal i
        e = operand()
        while peek()[0] == "op" and peek()[1] in ops:
            op = peek()[1]
            i += 1
            e = (op, e, operand())
        return e

    def product():
        return level(primary, ("*", "/"))

    def sum_():
        return level(product, ("+", "-"))

    try:
        e = sum_()
    except ValueError:
        return None
    return e if i == len(toks) else None


def eval_expr(tree, lookup):
    k = tree[0]
    if k == "num":
        return tree[1]
    if k == "var":
        return lookup(tree[1])
    if k == "neg":
        return -eval_expr(tree[1], lookup)
    a, b = eval_expr(tree[1], lookup), eval_expr(tree[2], lookup)
    if k == "+":
        return a + b
    if k == "-":
        return a - b
    if k == "*":
        return a * b
    if b == 0:
        raise BuildError("division by zero")
    if isinstance(a, int) and isinstance(b, int) and a % b == 0:
        return a // b  # integer / integer is exact when it divides
    return a / b


class Params:
    """A model's parameters: expressions evaluated lazily (a parameter may
    use one defined after it), overrides replacing expressions first."""

    def __init__(self, exprs, batch):
        self.exprs = dict(exprs)
        self.vals = {"batch": batch}
        self.busy = []

    def get(self, name):
        if name in self.vals:
            return self.vals[name]
        if name not in self.exprs:
            raise BuildError("unknown parameter $%s" % name)
        if name in self.busy:
            raise BuildError("parameter cycle: %s" % " -> ".join("$" + n for n in self.busy + [name]))
        self.busy.append(name)
        v = self.exprs[name]
        if isinstance(v, str):
            t = parse_expr(v)
            if t is None:
                raise BuildError("parameter $%s: cannot read %r" % (name, v))
            v = eval_expr(t, self.get)
        elif isinstance(v, bool) or v is None:
            raise BuildError("parameter $%s: not a number" % name)
        self.busy.pop()
        self.vals[name] = v
        return v

    def all(self):
        for n in self.exprs:
            self.get(n)
        return {n: self.vals[n] for n in self.exprs}


# ------------------------------------------------------------------ suites

def resolve_model_path(suite_path, model):
    sdir = os.path.dirname(os.path.abspath(suite_path))
    if "/" in model or model.endswith(".yaml"):
        return model if os.path.isabs(model) else os.path.join(sdir, model)
    env = os.environ.get("TCBENCH_MODELS")
    if env:
        return os.path.join(env, model + ".yaml")
    return os.path.join(sdir, "..", "models", model + ".yaml")


def scalar_number(v):
    """A suite's number (batch) or expression text."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    t = parse_expr(str(v))
    if t is None:
        raise BuildError("not a number: %r" % v)
    return eval_expr(t, lambda n: (_ for _ in ()).throw(BuildError("$%s outside a model" % n)))


def load_suite(path, size=None):
    doc = load_yaml(path)
    name = doc.get("name") or os.path.splitext(os.path.basename(path))[0]
    d = doc.get("defaults") or {}
    cases = []
    for c in doc["cases"]:
        model = str(c["model"])
        case = {
            "suite": name,
            "name": str(c.get("name") or os.path.splitext(os.path.basename(model))[0]),
            "model_path": resolve_model_path(path, model),
            "batch": int(scalar_number(c["batch"])),
            "params": dict(c.get("params") or {}),
            "loss": str(c.get("loss", d.get("loss", "model"))),
            "optimizer": c.get("optimizer", d.get("optimizer", "adamw")),
            "tolerance": dict(d.get("tolerance") or {}, **(c.get("tolerance") or {})),
            "study": bool(c.get("study", False)),
            "dp_sgd": c.get("dp_sgd"),
        }
        if size:
            s = (c.get("sizes") or {}).get(size)
            if s:
                case["params"].update(s.get("params") or {})
                if "batch" in s:
                    case["batch"] = int(scalar_number(s["batch"]))
        cases.append(case)
    return name, cases


# ------------------------------------------------------------------ tcbench's dropout masks

_M64 = (1 << 64) - 1
_GOLDEN = 0x9e3779b97f4a7c15


def _mix64_int(z):
    z &= _M64
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & _M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & _M64
    return z ^ (z >> 31)


def _mix64_np(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


def tcbench_dropout_scale(stream, step, shape, p):
    """tcbench's dropout (engine/core/op_rules.h): element i (row-major) of
    the site with mask stream `stream` is kept at training step `step` when
    the top 24 bits of mix64(key ^ i * golden) are at least p * 2^24; kept
    elements are scaled by (float)(1 / (1 - p)). Returns that factor per
    element (0 where dropped) as an f32 tensor of `shape`."""
    key = _mix64_int(_mix64_int(stream + _GOLDEN) + step)
    thr = 0 if not p > 0 else (1 << 24 if p >= 1 else int(p * 16777216.0))
    n = int(np.prod(shape)) if len(shape) else 1
    with np.errstate(over="ignore"):
        i = np.arange(n, dtype=np.uint64) * np.uint64(_GOLDEN)
        keep = (_mix64_np(np.uint64(key) ^ i) >> np.uint64(40)) >= np.uint64(thr)
    s = np.float32(1.0 / (1.0 - p))
    return torch.from_numpy(np.where(keep, s, np.float32(0)).astype(np.float32).reshape(shape))


# ------------------------------------------------------------------ the module tree

class Node(nn.Module):
    """A scope of parameter names (a residual, a repetition, a block call):
    its children are stored by local name, so state_dict keys come out as
    tcbench's PREFIX.ROLE names."""

    def forward(self, *a):  # never called
        raise RuntimeError("a name scope is not a layer")


def _child(mod, name):
    return mod._modules.get(name)


class YamlModel(nn.Module):
    """One model file built for one case: forward(*inputs) runs the recorded
    program of layers (no YAML is read at run time), returning the model's
    outputs; loss(inputs, outputs-env) is the case's training loss."""

    def __init__(self, model_path, overrides, batch, loss="model", attention="math",
                 example_inputs=None):
        super().__init__()
        self.md = load_yaml(model_path)
        self.model_path = model_path
        self.name_ = str(self.md.get("name", os.path.basename(model_path)))
        self.family = str(self.md.get("family", ""))
        exprs = dict(self.md.get("params") or {})
        for k, v in overrides.items():
            if k not in exprs:
                raise BuildError("override of $%s, which the model does not have" % k)
            exprs[k] = v
        self.P = Params(exprs, batch)
        self.param_values = self.P.all()
        self.batch = batch
        self.loss_kind = loss
        self.attention_impl = attention
        self.blocks = self.md.get("blocks") or {}
        # the program: (fn, input slots, output slots, slots freed after)
        self.program = []
        self.nslots = 0
        self.dropout_sites = []   # (site index, p, shape) in build order
        self.dropout_masks = None  # site -> f32 factor tensor (tcbench's masks)
        self.unused_prefixes = []  # layers with `unused: true`
        self.input_specs = []
        self._build(example_inputs)

    # ---------------------------------------------------------- build helpers

    def new_slot(self):
        self.nslots += 1
        return self.nslots - 1

    def scope(self, names):
        """The module at the dotted path names (a list), made on the way."""
        cur = self
        for p in names:
            nxt = _child(cur, p)
            if nxt is None:
                nxt = Node()
                cur._modules[p] = nxt
            cur = nxt
        return cur

    def register(self, prefix, module):
        """Puts module at the dotted prefix, making scopes on the way; in a
        shared repeat the first repetition's module is reused."""
        parts = prefix.split(".")
        cur = self.scope(parts[:-1])
        old = _child(cur, parts[-1])
        if old is not None:
            if self.b_shared and type(old) is type(module):
                for (n1, t1), (n2, t2) in zip(old.state_dict().items(), module.state_dict().items()):
                    if t1.shape != t2.shape:
                        raise BuildError("a shared repeat uses one '%s.%s' of shape %s in every "
                                         "repetition, and this one needs %s"
                                         % (prefix, n1, tuple(t1.shape), tuple(t2.shape)))
                return old
            raise BuildError("two layers named %s" % prefix)
        cur._modules[parts[-1]] = module
        return module

    def register_shared(self, name, module):
        """The module at name made by the first layer that names it (`share:`),
        used by every other; a layer needing another shape is an error."""
        try:
            holder, _ = self.lookup_tensor(name + ".weight")
        except BuildError:
            return self.register(name, module)
        for (n1, t1), (n2, t2) in zip(holder.state_dict().items(), module.state_dict().items()):
            if n1 != n2 or t1.shape != t2.shape:
                raise BuildError("the shared '%s.%s' is %s, and this layer needs %s"
                                 % (name, n1, tuple(t1.shape), tuple(t2.shape)))
        return holder

    def lookup_tensor(self, full):
        """A parameter or buffer by its full name (tie:, share:)."""
        parts = full.split(".")
        cur = self
        for p in parts[:-1]:
            cur = _child(cur, p)
            if cur is None:
                raise BuildError("no parameter named %s (yet)" % full)
        t = cur._parameters.get(parts[-1])
        if t is None:
            t = cur._buffers.get(parts[-1])
        if t is None:
            raise BuildError("no parameter named %s (yet)" % full)
        return cur, parts[-1]

    def shared_buffer(self, name, make):
        """A buffer every layer that asks for the same name shares
        (causal_mask.TxS, rope_cos.LxD): held under that exact name."""
        parts = name.split(".")
        cur = self.scope(parts[:-1])
        if parts[-1] not in cur._buffers:
            cur._buffers[parts[-1]] = make()
        holder, key = cur, parts[-1]
        return lambda: holder._buffers[key]

    def emit(self, fn, ins, nout=1):
        outs = [self.new_slot() for _ in range(nout)]
        vals = fn(*[self.b_env[i] for i in ins])
        if nout == 1:
            vals = (vals,)
        for s, v in zip(outs, vals):
            self.b_env[s] = v
        self.program.append([fn, list(ins), outs, []])
        return outs

    # ---------------------------------------------------------- values

    def value(self, v, frame):
        """A layer key's value: number, bool, word or list (docs/yaml.md)."""
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, list):
            return [self.value(x, frame) for x in v]
        if isinstance(v, dict):
            return {k: self.value(x, frame) for k, x in v.items()}
        s = str(v)
        if frame is not None and s.startswith("$") and s[1:] in frame and \
                (isinstance(frame[s[1:]], bool) or not isinstance(frame[s[1:]], (int, float))):
            return frame[s[1:]]  # a block's word or boolean parameter
        if isinstance(v, Quoted) and "$" not in s:
            return s
        t = parse_expr(s)
        if t is None:
            if "$" in s:
                raise BuildError("cannot read expression %r" % s)
            return s

        def look(n):
            if frame is not None and n in frame:
                x = frame[n]
                if isinstance(x, bool) or not isinstance(x, (int, float)):
                    raise BuildError("$%s is not a number" % n)
                return x
            return self.P.get(n)
        return eval_expr(t, look)

    # ---------------------------------------------------------- the body

    def _build(self, example_inputs):
        inputs = self.md.get("inputs") or {}
        self.b_env = {}
        self.b_shared = False
        self.b_frame = None
        root = Scope(None, "", None)
        self.input_slots = []
        for k, spec in inputs.items():
            shape = [int(self.value(x, None)) for x in spec["shape"]]
            dtype = str(spec.get("dtype", "f32"))
            rng = spec.get("range")
            rng = [int(self.value(x, None)) for x in rng] if rng else None
            self.input_specs.append((k, shape, dtype, rng))
            s = self.new_slot()
            self.input_slots.append(s)
            root.bind(k, s)
            if example_inputs is not None:
                t = example_inputs[k]
            else:
                t = make_input(shape, dtype, rng)
            self.b_env[s] = t
        root.prev = self.input_slots[0]
        self.root_scope = root
        self.eval()
        with torch.no_grad():
            self.steps(self.md["body"], root)
        outs = self.md.get("outputs")
        if outs:
            outs = outs if isinstance(outs, list) else [outs]
            self.output_slots = [root.find(str(o)) for o in outs]
        else:
            self.output_slots = [root.prev]
        self.loss_spec = self._loss_spec(root)
        self.last_prev = root.prev
        self._plan_frees()
        self.example = {k: self.b_env[s] for (k, *_), s in zip(self.input_specs, self.input_slots)}
        del self.b_env

    def _plan_frees(self):
        keep = set(self.output_slots) | set(self.loss_slots)
        last = {}
        for i, op in enumerate(self.program):
            for s in op[1]:
                last[s] = i
        for s, i in last.items():
            if s not in keep:
                self.program[i][3].append(s)

    def steps(self, seq, sc):
        for s in seq:
            if isinstance(s, str):
                if s in self.blocks:
                    self.call_block(s, None, sc)
                else:
                    self.layer(s, {}, sc)
                continue
            if not isinstance(s, dict) or not s:
                raise BuildError("a step must be a layer, repeat, residual or block call: %r" % (s,))
            first = next(iter(s))
            if first in self.blocks:
                self.call_block(first, s[first] or {}, sc)
            elif "repeat" in s:
                self.repeat(s, sc)
            elif "residual" in s:
                self.residual(s, sc)
            else:
                self.layer(first, s[first] or {}, sc)

    def step_inputs(self, spec, sc):
        if spec is None:
            return [sc.prev]
        names = spec if isinstance(spec, list) else [spec]
        return [sc.prev if str(n) == "." else sc.find(str(n)) for n in names]

    @staticmethod
    def as_base(as_):
        if as_ is None:
            return None
        return str(as_[0] if isinstance(as_, list) else as_)

    def step_outputs(self, sc, as_, outs):
        sc.prev = outs[0]
        if as_ is not None:
            names = as_ if isinstance(as_, list) else [as_]
            for n, o in zip(names, outs):
                sc.bind(str(n), o)

    def residual(self, s, sc):
        ins = self.step_inputs(s.get("input"), sc)
        prefix = sc.take(self.as_base(s.get("as")) or "residual")
        inner = Scope(sc, prefix, ins[0])
        self.steps(s["residual"], inner)
        a, b = self.b_env[inner.prev], self.b_env[ins[0]]
        if a.shape != b.shape:
            raise BuildError("residual: the body turns %s into %s" % (tuple(b.shape), tuple(a.shape)))
        out = self.emit(torch.add, [inner.prev, ins[0]])
        self.step_outputs(sc, s.get("as"), out)

    def repeat(self, s, sc):
        cnt = s["repeat"]
        n = self.value(cnt, self.b_frame)
        n = as_int(n, "the repeat count")
        cur = self.step_inputs(s.get("input"), sc)[0]
        base = self.as_base(s.get("as"))
        if base is None:
            m = re.fullmatch(r"\s*\$([A-Za-z0-9_]+)\s*", str(cnt))
            base = m.group(1) if m else "repeat"
        prefix = sc.take(base)
        shared = bool(s.get("shared", False))
        was = self.b_shared
        self.b_shared = was or shared
        for i in range(n):
            p = prefix if shared else "%s.%d" % (prefix, i)
            inner = Scope(sc, p, cur)
            self.steps(s["body"], inner)
            cur = inner.prev
        self.b_shared = was
        self.step_outputs(sc, s.get("as"), [cur])

    def call_block(self, name, m, sc):
        m = m or {}
        blk = self.blocks[name]
        params = blk.get("params") or {}
        ins = self.step_inputs(m.get("input"), sc)
        innames = blk.get("inputs")
        frame = {}
        for k, default in params.items():
            if k in m:
                frame[k] = self.value(m[k], self.b_frame)
            elif default is None:
                raise BuildError("block '%s' needs '%s'" % (name, k))
            else:
                frame[k] = self.value(default, None)
        prefix = sc.take(self.as_base(m.get("as")) or name)
        inner = Scope(None, prefix, ins[0])
        if innames is not None:
            innames = innames if isinstance(innames, list) else [innames]
            for n, i in zip(innames, ins):
                inner.bind(str(n), i)
        caller = self.b_frame
        self.b_frame = frame
        self.steps(blk["body"], inner)
        self.b_frame = caller
        self.step_outputs(sc, m.get("as"), [inner.prev])

    def layer(self, typ, m, sc):
        m = m or {}
        ins = self.step_inputs(m.get("input"), sc)
        prefix = sc.take(self.as_base(m.get("as")) or typ)
        keys = {k: self.value(v, self.b_frame) for k, v in m.items()
                if k not in ("input", "as", "unused")}
        builder = LAYERS.get(typ)
        if builder is None:
            raise Unsupported("layer '%s' is not built in the PyTorch builder yet" % typ)
        shapes = [self.b_env[i] for i in ins]
        unused = bool(m.get("unused", False))
        fn, nout = builder(self, prefix, keys, shapes)
        if unused:
            self.unused_prefixes.append(prefix)
            self.step_outputs(sc, m.get("as"), [ins[0]])
            return
        outs = self.emit(fn, ins, nout)
        self.step_outputs(sc, m.get("as"), outs)

    # ---------------------------------------------------------- loss

    def _loss_spec(self, root):
        self.loss_slots = []
        if self.loss_kind == "output_mean":
            self.loss_slots = list(self.output_slots)
            return ("suite_output_mean", list(self.output_slots))
        spec = self.md.get("loss")
        if not spec:
            return None

        def one(k, v):
            v = v or {}
            inp = root.find(str(v["input"])) if "input" in v else root.prev
            tgt = root.find(str(v["target"])) if "target" in v else None
            self.loss_slots.extend([inp] + ([tgt] if tgt is not None else []))
            kw = {a: self.value(b, None) for a, b in v.items() if a not in ("input", "target")}
            return (k, inp, tgt, kw)
        (k, v), = spec.items()
        if k == "mean":
            return ("mean", [one(*next(iter(x.items()))) for x in v])
        return one(k, v)

    def compute_loss(self, env):
        spec = self.loss_spec
        if spec is None:
            raise BuildError("the model has no loss: section")
        if spec[0] == "suite_output_mean":
            outs = [env[s] for s in spec[1] if env[s].is_floating_point()]
            return sum(o.mean() for o in outs) / len(outs)
        if spec[0] == "mean":
            ls = [self._one_loss(env, x) for x in spec[1]]
            return sum(ls) / len(ls)
        return self._one_loss(env, spec)

    def per_sample_losses(self, env):
        """(B,): each sample's B times its share of the mean loss (DP-SGD)."""
        spec = self.loss_spec
        specs = spec[1] if spec[0] == "mean" else [spec]
        total = 0
        for sp in specs:
            k, inp, tgt, kw = sp
            x = env[inp]
            B = x.shape[0]
            if k == "cross_entropy":
                C = x.shape[-1]
                y = env[tgt].reshape(-1).long()
                ig = int(kw.get("ignore_index", -100))
                el = F.cross_entropy(x.reshape(-1, C), y, ignore_index=ig, reduction="none",
                                     label_smoothing=float(kw.get("label_smoothing", 0.0)))
                n = (y != ig).sum().clamp(min=1)
            elif k == "mse":
                el = F.mse_loss(x, env[tgt], reduction="none")
                n = el.numel()
            else:
                raise Unsupported("dp_sgd with loss '%s' is not built in the PyTorch builder" % k)
            total = total + el.reshape(B, -1).sum(1) * B / n
        return total / len(specs)

    def _one_loss(self, env, spec):
        k, inp, tgt, kw = spec
        x = env[inp]
        y = env[tgt] if tgt is not None else None
        if k == "cross_entropy":
            C = x.shape[-1]
            return F.cross_entropy(x.reshape(-1, C), y.reshape(-1).long(),
                                   ignore_index=int(kw.get("ignore_index", -100)),
                                   label_smoothing=float(kw.get("label_smoothing", 0.0)))
        if k == "mse":
            return F.mse_loss(x, y)
        if k == "bce":
            return F.binary_cross_entropy(x, y.float())
        if k == "bce_with_logits":
            return F.binary_cross_entropy_with_logits(x, y.float())
        if k == "output_mean":
            return x.mean()
        raise Unsupported("loss '%s' is not built in the PyTorch builder yet" % k)

    # ---------------------------------------------------------- running

    def run(self, inputs):
        env = [None] * self.nslots
        for s, t in zip(self.input_slots, inputs):
            env[s] = t
        for fn, ins, outs, frees in self.program:
            r = fn(*[env[i] for i in ins])
            if len(outs) == 1:
                env[outs[0]] = r
            else:
                for o, v in zip(outs, r):
                    env[o] = v
            for f in frees:
                env[f] = None
        return env

    def forward(self, *inputs):
        env = self.run(inputs)
        return tuple(env[s] for s in self.output_slots)

    def forward_loss(self, *inputs):
        env = self.run(inputs)
        return self.compute_loss(env)


class Scope:
    """Tensor names (inputs and `as:` names) and local parameter names."""

    def __init__(self, parent, prefix, prev):
        self.parent, self.prefix, self.prev = parent, prefix, prev
        self.names = {}
        self.used = set()

    def bind(self, name, slot):
        self.names[name] = slot

    def find(self, name):
        s = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        raise BuildError("no tensor named '%s' here" % name)

    def take(self, base):
        local, k = base, 1
        while local in self.used:
            local = "%s_%d" % (base, k)
            k += 1
        self.used.add(local)
        return "%s.%s" % (self.prefix, local) if self.prefix else local


def as_int(v, what):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BuildError("%s must be a number, got %r" % (what, v))
    if isinstance(v, float):
        if v != int(v):
            raise BuildError("%s must be an integer; it is %g" % (what, v))
        v = int(v)
    return v


def make_input(shape, dtype, rng):
    if dtype in ("i32", "i64"):
        lo, hi = rng if rng else (0, 2)
        return torch.randint(lo, hi, shape, dtype=torch.int64)
    if dtype == "bool":
        return torch.randint(0, 2, shape).bool()
    return torch.randn(shape, dtype=torch.float16 if dtype == "f16" else torch.float32)


# ------------------------------------------------------------------ layers
# Each builder gets (model, prefix, keys, example input tensors) and returns
# (callable over the input tensors, number of outputs). A layer with
# parameters registers its nn.Module at the prefix.

LAYERS = {}


def layer(*names):
    def deco(f):
        for n in names:
            LAYERS[n] = f
        return f
    return deco


def pair(v):
    return tuple(v) if isinstance(v, list) else (v, v)


def check_keys(typ, keys, allowed):
    for k in keys:
        if k not in allowed:
            raise Unsupported("%s: key '%s' is not built in the PyTorch builder yet" % (typ, k))


class TiedEmbedding(nn.Module):
    def __init__(self, get):
        super().__init__()
        self._get = get

    def forward(self, ids):
        return F.embedding(ids, self._get())


@layer("embedding")
def _embedding(M, prefix, k, xs):
    check_keys("embedding", k, {"num", "dim", "tie"})
    if k.get("tie"):
        holder, key = M.lookup_tensor(k["tie"])
        return TiedEmbedding(lambda: holder._parameters[key]), 1
    return M.register(prefix, nn.Embedding(int(k["num"]), int(k["dim"]))), 1


class PositionalEmbedding(nn.Module):
    def __init__(self, mx, d, offset):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(mx, d))
        self.offset = offset

    def forward(self, x):
        T = x.shape[-2]
        return x + self.weight[self.offset:self.offset + T]


@layer("positional_embedding")
def _pos(M, prefix, k, xs):
    check_keys("positional_embedding", k, {"max", "offset"})
    return M.register(prefix, PositionalEmbedding(int(k["max"]), xs[0].shape[-1],
                                                  int(k.get("offset", 0)))), 1


class TiedLinear(nn.Module):
    """A linear whose weight is an earlier parameter (a head tied to the
    word embeddings); with extra rows (MobileBERT's decoder) x @ cat(tied^T,
    extra.weight) + bias."""

    def __init__(self, get, out, bias, extra=0):
        super().__init__()
        self._get = get
        self.bias = nn.Parameter(torch.zeros(out)) if bias else None
        self.extra = None
        if extra:
            self.extra = Node()
            self.extra.weight = nn.Parameter(torch.zeros(extra, out))

    def forward(self, x):
        if self.extra is None:
            return F.linear(x, self._get(), self.bias)
        w = torch.cat((self._get().t(), self.extra.weight), dim=0)
        y = torch.matmul(x, w)
        return y + self.bias if self.bias is not None else y


@layer("linear")
def _linear(M, prefix, k, xs):
    check_keys("linear", k, {"out", "bias", "tie", "tie_extra"})
    out, bias = int(k["out"]), k.get("bias", True)
    if k.get("tie"):
        holder, key = M.lookup_tensor(k["tie"])
        return M.register(prefix, TiedLinear(lambda: holder._parameters[key], out, bias,
                                             int(k.get("tie_extra", 0)))), 1
    return M.register(prefix, nn.Linear(xs[0].shape[-1], out, bias=bias)), 1


class StdConv2d(nn.Conv2d):
    """timm's ScaledStdConv2d (NFNet): the weight standardized per output
    channel every call (a batch norm over (1, out, fan_in), biased
    variance), times gain * gamma / sqrt(fan_in)."""

    def __init__(self, *a, gamma=1.0, eps=1e-6, **kw):
        super().__init__(*a, **kw)
        self.gain = nn.Parameter(torch.ones(self.out_channels, 1, 1, 1))
        self.scale = gamma * self.weight[0].numel() ** -0.5
        self.eps = eps

    def forward(self, x):
        w = F.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                         weight=(self.gain * self.scale).reshape(-1), training=True,
                         momentum=0.0, eps=self.eps).reshape_as(self.weight)
        return F.conv2d(x, w, self.bias, self.stride, self.padding, self.dilation, self.groups)


def _conv(typ):
    extra = {"conv2d": {"share"}, "conv_transpose2d": {"output_padding"},
             "std_conv2d": {"gamma", "eps"}}[typ]

    def b(M, prefix, k, xs):
        check_keys(typ, k, {"out", "kernel", "stride", "padding", "dilation", "groups",
                            "bias"} | extra)
        C = xs[0].shape[1]
        args = dict(kernel_size=pair(k["kernel"]), stride=pair(k.get("stride", 1)),
                    padding=pair(k.get("padding", 0)), dilation=pair(k.get("dilation", 1)),
                    groups=int(k.get("groups", 1)), bias=k.get("bias", True))
        if typ == "conv_transpose2d":
            mod = nn.ConvTranspose2d(C, int(k["out"]),
                                     output_padding=pair(k.get("output_padding", 0)), **args)
        elif typ == "std_conv2d":
            mod = StdConv2d(C, int(k["out"]), gamma=float(k.get("gamma", 1.0)),
                            eps=float(k.get("eps", 1e-6)), **args)
        else:
            mod = nn.Conv2d(C, int(k["out"]), **args)
        if k.get("share"):
            return M.register_shared(str(k["share"]), mod), 1
        return M.register(prefix, mod), 1
    return b


for _n in ("conv2d", "conv_transpose2d", "std_conv2d"):
    LAYERS[_n] = _conv(_n)


@layer("batch_norm")
def _bn(M, prefix, k, xs):
    check_keys("batch_norm", k, {"eps", "momentum"})
    if M.b_shared:
        raise BuildError("batch_norm cannot sit in a shared repeat")
    nd = xs[0].dim()
    cls = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}[nd]
    bn = cls(xs[0].shape[1], eps=float(k.get("eps", 1e-5)), momentum=float(k.get("momentum", 0.1)))
    # tcbench keeps running_mean and running_var only; with a momentum
    # num_batches_tracked changes nothing, so it is dropped (None buffers
    # are left out of state_dict, and BatchNorm skips its update)
    bn.num_batches_tracked = None
    return M.register(prefix, bn), 1


@layer("layer_norm")
def _ln(M, prefix, k, xs):
    check_keys("layer_norm", k, {"eps"})
    return M.register(prefix, nn.LayerNorm(xs[0].shape[-1], eps=float(k.get("eps", 1e-5)))), 1


@layer("rms_norm")
def _rms(M, prefix, k, xs):
    check_keys("rms_norm", k, {"eps"})
    return M.register(prefix, nn.RMSNorm(xs[0].shape[-1], eps=float(k.get("eps", 1e-6)))), 1


@layer("group_norm")
def _gn(M, prefix, k, xs):
    check_keys("group_norm", k, {"groups", "eps"})
    return M.register(prefix, nn.GroupNorm(int(k["groups"]), xs[0].shape[1],
                                           eps=float(k.get("eps", 1e-5)))), 1


class LayerNorm2d(nn.LayerNorm):
    """timm's LayerNorm2d: a layer norm over the channels of (N, C, H, W)."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias,
                            self.eps).permute(0, 3, 1, 2)


@layer("layer_norm2d")
def _ln2d(M, prefix, k, xs):
    check_keys("layer_norm2d", k, {"eps"})
    return M.register(prefix, LayerNorm2d(xs[0].shape[1], eps=float(k.get("eps", 1e-6)))), 1


@layer("instance_norm")
def _in(M, prefix, k, xs):
    check_keys("instance_norm", k, {"affine", "track_running_stats", "eps"})
    cls = {3: nn.InstanceNorm1d, 4: nn.InstanceNorm2d, 5: nn.InstanceNorm3d}[xs[0].dim()]
    m = cls(xs[0].shape[1], eps=float(k.get("eps", 1e-5)), affine=bool(k.get("affine", False)),
            track_running_stats=bool(k.get("track_running_stats", False)))
    m.num_batches_tracked = None  # as batch_norm's: tcbench keeps the two statistics
    return M.register(prefix, m), 1


class LayerScale(nn.Module):
    def __init__(self, c, init, channels_first):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((c,), float(init)))
        self.cf = channels_first

    def forward(self, x):
        if self.cf:
            return x * self.gamma.reshape((1, -1) + (1,) * (x.dim() - 2))
        return x * self.gamma


@layer("layer_scale")
def _ls(M, prefix, k, xs):
    check_keys("layer_scale", k, {"init", "channels_first"})
    cf = bool(k.get("channels_first", False))
    c = xs[0].shape[1] if cf else xs[0].shape[-1]
    return M.register(prefix, LayerScale(c, k.get("init", 1e-5), cf)), 1


_ACTS = {
    "relu": F.relu, "relu6": F.relu6, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid,
    "mish": F.mish, "selu": F.selu, "exp": torch.exp, "identity": lambda x: x,
    "normalize": lambda x: F.normalize(x, p=2.0, dim=-1),
}


def _act_builder(name):
    def b(M, prefix, k, xs):
        check_keys(name, k, set())
        return _ACTS[name], 1
    return b


for _n in _ACTS:
    LAYERS[_n] = _act_builder(_n)


@layer("leaky_relu")
def _lrelu(M, prefix, k, xs):
    s = float(k.get("negative_slope", 0.01))
    return (lambda x: F.leaky_relu(x, s)), 1


@layer("elu")
def _elu(M, prefix, k, xs):
    a = float(k.get("alpha", 1.0))
    return (lambda x: F.elu(x, a)), 1


@layer("softplus")
def _softplus(M, prefix, k, xs):
    b, t = float(k.get("beta", 1.0)), float(k.get("threshold", 20))
    return (lambda x: F.softplus(x, b, t)), 1


class Dropout(nn.Module):
    """nn.Dropout, or with the model's tcbench masks set (the check of a
    training step) tcbench's own mask for this site (tcbench_dropout_scale)."""

    def __init__(self, M, p, site):
        super().__init__()
        self.p, self.site = p, site
        self._M = [M]  # not a child module

    def forward(self, x):
        if not self._M[0].training or self.p == 0:
            return x
        masks = self._M[0].dropout_masks
        if masks is not None:
            return x * masks[self.site]
        return F.dropout(x, self.p, True)


@layer("dropout")
def _dropout(M, prefix, k, xs):
    check_keys("dropout", k, {"p"})
    p = float(k.get("p", 0.1))
    site = len(M.dropout_sites)
    if p > 0:
        M.dropout_sites.append((site, p, tuple(xs[0].shape), "dropout"))
    # held in a plain dict, not registered: no parameters, no name
    d = Dropout(M, p, site)
    return d, 1


class DropPath(nn.Module):
    def __init__(self, M, p, site):
        super().__init__()
        self.p, self.site = p, site
        self._M = [M]

    def forward(self, x):
        if not self._M[0].training or self.p == 0:
            return x
        masks = self._M[0].dropout_masks
        if masks is not None:
            return x * masks[self.site]
        keep = torch.empty((x.shape[0],) + (1,) * (x.dim() - 1), dtype=x.dtype).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)


@layer("drop_path")
def _drop_path(M, prefix, k, xs):
    p = float(k.get("p", 0))
    site = len(M.dropout_sites)
    if p > 0:
        x = xs[0]
        M.dropout_sites.append((site, p, (x.shape[0],) + (1,) * (x.dim() - 1), "drop_path"))
    return DropPath(M, p, site), 1


class Attention(nn.Module):
    """Multi-head attention as Hugging Face's eager modules run it (the
    default; --attention sdpa: F.scaled_dot_product_attention): q, k, v
    projections (or one fused qkv), rotary embeddings on the first
    rotary_dims of each head (rotate_half's pairs, or interleaved ones as
    GPT-J), repeat_kv, q k^T times the scale, a score bias, the mask (causal,
    a causal window or a band) by where with the lowest float, softmax,
    times v, the output projection."""

    def __init__(self, M, D, Dk, Dv, H, KVH, hd, qkv_bias, out_bias, causal, rope, theta, scale,
                 fused, per_head, T, S, window, rdims, interleaved, sep, k_bias=True):
        super().__init__()
        self.H, self.KVH, self.hd = H, KVH, hd
        self.causal, self.rope, self.scale = causal, rope, scale
        self.fused, self.per_head, self.sep = fused, per_head, sep
        self.rdims, self.interleaved = rdims, interleaved
        self.sdpa = M.attention_impl == "sdpa"
        self.k_zeros = None
        if fused and not k_bias:  # BEiT's q_bias and v_bias, a zero k bias
            self.qkv = nn.Linear(D, 3 * H * hd, bias=False)
            self.q_bias = nn.Parameter(torch.zeros(H * hd))
            self.v_bias = nn.Parameter(torch.zeros(H * hd))
            self.k_zeros = M.shared_buffer("zeros.%d" % (H * hd), lambda: torch.zeros(H * hd))
        elif fused:
            self.qkv = nn.Linear(D, (H + 2 * KVH) * hd, bias=qkv_bias)
        else:
            self.q = nn.Linear(D, H * hd, bias=qkv_bias)
            self.k = nn.Linear(Dk, KVH * hd, bias=qkv_bias)
            self.v = nn.Linear(Dv, KVH * hd, bias=qkv_bias)
        self.o = nn.Linear(H * hd, D, bias=out_bias)
        # the shared buffers, under tcbench's names: rope tables, then the mask
        if rope:
            L = max(T, S)
            self.rope_cos = M.shared_buffer("rope_cos.%dx%d" % (L, rdims),
                                            lambda: rope_table(L, rdims, theta)[0])
            self.rope_sin = M.shared_buffer("rope_sin.%dx%d" % (L, rdims),
                                            lambda: rope_table(L, rdims, theta)[1])
        # a window that covers every key is the plain mask (or none)
        if window and (window >= S if causal else window // 2 >= S - 1):
            window = 0
        self.mask = None
        if window:
            t = torch.arange(T)[:, None] + (S - T)
            c = torch.arange(S)[None, :]
            if causal:
                self.mask = M.shared_buffer("window_mask.%dx%d.%d" % (T, S, window),
                                            lambda: (t - c >= 0) & (t - c < window))
            else:
                self.mask = M.shared_buffer("band_mask.%dx%d.%d" % (T, S, window),
                                            lambda: (c - t).abs() <= window // 2)
        elif causal:
            self.mask = M.shared_buffer("causal_mask.%dx%d" % (T, S),
                                        lambda: torch.ones(T, S, dtype=torch.bool).tril(S - T))

    def heads(self, t, n):
        B, S, _ = t.shape
        return t.reshape(B, S, n, self.hd).permute(0, 2, 1, 3)

    def rotate(self, t, cos, sin):
        d = self.rdims
        r, rest = (t, None) if d == self.hd else (t[..., :d], t[..., d:])
        if self.interleaved:  # pairs (2i, 2i+1), the tables' first half
            c, s_ = cos[:, :d // 2], sin[:, :d // 2]
            x0, x1 = r[..., 0::2], r[..., 1::2]
            r = torch.stack((x0 * c - x1 * s_, x1 * c + x0 * s_), dim=-1).flatten(-2)
        else:
            r = r * cos + rotate_half(r) * sin
        return r if rest is None else torch.cat((r, rest), dim=-1)

    def forward(self, x, *more):
        nk = 2 if self.sep else 1
        kv = more[0] if len(more) >= 1 else x
        vin = more[1] if self.sep else kv
        bias = more[nk] if len(more) > nk else None
        B, T, _ = x.shape
        if self.fused:
            if self.k_zeros is None:
                qkv = self.qkv(x)
            else:
                qkv = F.linear(x, self.qkv.weight,
                               torch.cat((self.q_bias, self.k_zeros(), self.v_bias)))
            if self.per_head:
                qkv = qkv.reshape(B, T, self.H, 3 * self.hd).permute(0, 2, 1, 3)
                q, k, v = qkv.split(self.hd, dim=-1)
            else:
                q, k, v = qkv.split([self.H * self.hd, self.KVH * self.hd, self.KVH * self.hd], -1)
                q, k, v = self.heads(q, self.H), self.heads(k, self.KVH), self.heads(v, self.KVH)
        else:
            q = self.heads(self.q(x), self.H)
            k = self.heads(self.k(kv), self.KVH)
            v = self.heads(self.v(vin), self.KVH)
        S = k.shape[2]
        if self.rope:
            cos, sin = self.rope_cos(), self.rope_sin()
            L = cos.shape[0]
            q = self.rotate(q, cos[L - T:], sin[L - T:])
            k = self.rotate(k, cos[L - S:], sin[L - S:])
        if self.KVH != self.H:  # repeat_kv
            r = self.H // self.KVH
            k = k[:, :, None].expand(B, self.KVH, r, S, self.hd).reshape(B, self.H, S, self.hd)
            v = v[:, :, None].expand(B, self.KVH, r, S, self.hd).reshape(B, self.H, S, self.hd)
        if self.sdpa:
            m = bias
            if self.mask is not None:
                low = torch.where(self.mask(), 0.0, torch.finfo(q.dtype).min).to(q.dtype)
                m = low if m is None else m + low
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=self.scale)
        else:
            w = torch.matmul(q, k.transpose(-1, -2))
            if self.scale != 1.0:
                w = w * self.scale
            if bias is not None:
                w = w + bias
            if self.mask is not None:
                w = torch.where(self.mask(), w, torch.finfo(w.dtype).min)
            w = torch.softmax(w, dim=-1)
            o = torch.matmul(w, v)
        o = o.permute(0, 2, 1, 3).reshape(B, T, self.H * self.hd)
        return self.o(o)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_table(L, d, theta):
    """cos and sin (L, d) in rotate_half's layout (angle i at i and i + d/2),
    as Hugging Face's LlamaRotaryEmbedding, computed in f64 and rounded."""
    inv = 1.0 / (float(theta) ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    f = torch.outer(torch.arange(L, dtype=torch.float64), inv)
    e = torch.cat((f, f), dim=-1)
    return e.cos().float(), e.sin().float()


@layer("attention")
def _attention(M, prefix, k, xs):
    check_keys("attention", k, {"heads", "kv_heads", "head_dim", "causal", "rotary", "rope_theta",
                                "bias", "qkv_bias", "out_bias", "fused_qkv", "qkv_per_head",
                                "scale", "window", "rotary_dims", "rotary_interleaved",
                                "separate_values", "k_bias"})
    x = xs[0]
    sep = bool(k.get("separate_values", False))
    mem = xs[1] if len(xs) > 1 else x
    vin = xs[2] if sep else mem
    D, T, S = x.shape[-1], x.shape[1], mem.shape[1]
    H = int(k["heads"])
    KVH = int(k.get("kv_heads", H))
    hd = int(k.get("head_dim", D // H))
    bias = k.get("bias", True)
    scale = float(k.get("scale", 1.0 / math.sqrt(hd)))
    mod = Attention(M, D, mem.shape[-1], vin.shape[-1], H, KVH, hd, k.get("qkv_bias", bias),
                    k.get("out_bias", bias), bool(k.get("causal", False)),
                    bool(k.get("rotary", False)), k.get("rope_theta", 10000.0), scale,
                    bool(k.get("fused_qkv", False)), bool(k.get("qkv_per_head", False)), T, S,
                    int(k.get("window", 0)), int(k.get("rotary_dims", hd)),
                    bool(k.get("rotary_interleaved", False)), sep, bool(k.get("k_bias", True)))
    return M.register(prefix, mod), 1


class RelativePositionBias(nn.Module):
    """T5's relative position bias, T5Attention.compute_bias: the weight
    (buckets, heads) gathered at a constant (T, S) table of buckets, shared
    by the layers that ask for the same one (tcbench's relative_bucket.*)."""

    def __init__(self, M, buckets, max_distance, heads, bidirectional, T, S):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(buckets, heads))
        self.table = M.shared_buffer(
            "relative_bucket.%s%dx%d.%dx%d" % ("bi" if bidirectional else "causal", buckets,
                                               max_distance, T, S),
            lambda: relative_buckets(T, S, buckets, max_distance, bidirectional).int())

    def forward(self, x, mem=None):
        b = F.embedding(self.table().long(), self.weight)  # (T, S, H)
        return b.permute(2, 0, 1).unsqueeze(0)


def unfold_taps(A, K):
    """tcbench's one-hot taps (A K, 1, K, 1) that unfold as a grouped
    convolution: channel c's tap j at c K + j."""
    t = torch.zeros(A * K, 1, K, 1)
    t[torch.arange(A * K), 0, torch.arange(A * K) % K, 0] = 1
    return t


class ConvBertAttention(nn.Module):
    """Hugging Face's ConvBertSelfAttention: H self-attention heads (query,
    key, value; no output projection) beside H span-based dynamic
    convolution heads (key_conv, a separable convolution over time, times
    the queries -> conv_kernel, softmax over the K taps, over conv_out's
    values unfolded), concatenated attention heads first. The separable
    convolution's weights are held 4-D as tcbench's, (D, 1, K, 1) and (A,
    D, 1, 1): Conv2d over (B, D, T, 1), the class's Conv1d."""

    def __init__(self, M, D, heads, hd, K):
        super().__init__()
        A = heads * hd
        self.H, self.hd, self.K = heads, hd, K
        self.query, self.key, self.value = (nn.Linear(D, A) for _ in range(3))
        self.key_conv = Node()
        self.key_conv.depthwise = nn.Conv2d(D, D, (K, 1), padding=(K // 2, 0), groups=D,
                                            bias=False)
        self.key_conv.pointwise = nn.Conv2d(D, A, 1, bias=False)
        self.key_conv.bias = nn.Parameter(torch.zeros(A, 1))
        self.conv_kernel = nn.Linear(A, heads * K)
        self.conv_out = nn.Linear(D, A)
        M.shared_buffer("unfold_taps.%dx%d" % (A, K), lambda: unfold_taps(A, K))  # named only

    def forward(self, x):
        B, T, _ = x.shape
        H, hd, K = self.H, self.hd, self.K
        A = H * hd
        q = self.query(x)
        kc = self.key_conv.pointwise(self.key_conv.depthwise(x.transpose(1, 2).unsqueeze(-1)))
        kc = (kc.squeeze(-1) + self.key_conv.bias).transpose(1, 2)
        kern = self.conv_kernel(kc * q).reshape(-1, K, 1).softmax(dim=1)
        co = self.conv_out(x).transpose(1, 2).contiguous().unsqueeze(-1)
        co = F.unfold(co, kernel_size=[K, 1], padding=[(K - 1) // 2, 0])
        co = co.transpose(1, 2).reshape(B, -1, A, K).reshape(-1, hd, K)
        co = torch.matmul(co, kern).reshape(B, -1, H, hd)
        qh, kh, vh = (t.view(B, T, H, hd).permute(0, 2, 1, 3)
                      for t in (q, self.key(x), self.value(x)))
        p = (qh @ kh.transpose(-1, -2) / math.sqrt(hd)).softmax(dim=-1)
        ctx = (p @ vh).permute(0, 2, 1, 3)
        return torch.cat([ctx, co], 2).reshape(B, T, 2 * A)


@layer("convbert_attention")
def _convbert(M, prefix, k, xs):
    check_keys("convbert_attention", k, {"heads", "head_dim", "kernel"})
    D, H = xs[0].shape[-1], int(k["heads"])
    return M.register(prefix, ConvBertAttention(M, D, H, int(k.get("head_dim", D // H // 2)),
                                                int(k.get("kernel", 9)))), 1


class DisentangledAttention(nn.Module):
    """Hugging Face's DisentangledSelfAttention (deberta, deberta_v2) with
    relative_attention off, then the output linear `o`: version 1 one
    in_proj (rows per head [q_h | k_h | v_h]) and q_bias, v_bias, the query
    divided by sqrt(head_dim); version 2 q, k, v with biases, the
    transposed keys divided."""

    def __init__(self, D, heads, version):
        super().__init__()
        self.H, self.version = heads, version
        if version == 1:
            self.in_proj = nn.Linear(D, 3 * D, bias=False)
            self.q_bias = nn.Parameter(torch.zeros(D))
            self.v_bias = nn.Parameter(torch.zeros(D))
        else:
            self.q, self.k, self.v = (nn.Linear(D, D) for _ in range(3))
        self.o = nn.Linear(D, D)

    def heads(self, t):  # (..., T, H hd) -> (B, H, T, hd), transpose_for_scores
        return t.view(t.shape[:-1] + (self.H, -1)).permute(0, 2, 1, 3)

    def forward(self, x):
        B, T, D = x.shape
        scale = math.sqrt(D // self.H)
        if self.version == 1:
            q, k, v = self.heads(self.in_proj(x)).chunk(3, dim=-1)
            q = (q + self.heads(self.q_bias[None, None, :])) / scale
            v = v + self.heads(self.v_bias[None, None, :])
            scores = q @ k.transpose(-1, -2)
        else:
            q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
            scores = q @ (k.transpose(-1, -2) / scale)
        ctx = scores.softmax(dim=-1) @ v
        return self.o(ctx.permute(0, 2, 1, 3).reshape(B, T, D))


@layer("disentangled_attention")
def _disentangled(M, prefix, k, xs):
    check_keys("disentangled_attention", k, {"heads", "version"})
    return M.register(prefix, DisentangledAttention(xs[0].shape[-1], int(k["heads"]),
                                                    int(k.get("version", 1)))), 1


def window_index(wh, ww, cls):
    """timm's relative_position_index of a wh x ww window (N, N): each token
    pair's 2-D offset as a row of the table; with cls (BEiT's
    gen_relative_position_index) token 0 takes its last three rows."""
    c = torch.stack(torch.meshgrid(torch.arange(wh), torch.arange(ww), indexing="ij")).flatten(1)
    rel = (c[:, :, None] - c[:, None, :]).permute(1, 2, 0)
    idx = (rel[:, :, 0] + wh - 1) * (2 * ww - 1) + rel[:, :, 1] + ww - 1
    if not cls:
        return idx.int()
    n, rows = wh * ww + 1, (2 * wh - 1) * (2 * ww - 1) + 3
    out = torch.zeros(n, n, dtype=idx.dtype)
    out[1:, 1:] = idx
    out[0, 0:] = rows - 3
    out[0:, 0] = rows - 2
    out[0, 0] = rows - 1
    return out.int()


class WindowPositionBias(nn.Module):
    """(1, heads, N, N): relative_position_bias_table gathered at the
    window's relative_position_index (shared by the layers of one window).
    Swin's window attention holds the table itself, as timm's classes."""

    def __init__(self, M, wh, ww, heads, cls):
        super().__init__()
        rows = (2 * wh - 1) * (2 * ww - 1) + 3 * cls
        self.relative_position_bias_table = nn.Parameter(torch.zeros(rows, heads))
        self.index = M.shared_buffer("relative_position_index.%dx%d%s" % (
            wh, ww, ".cls" if cls else ""), lambda: window_index(wh, ww, cls))

    def forward(self, x=None):
        idx = self.index().long()
        b = self.relative_position_bias_table[idx.view(-1)].view(idx.shape + (-1,))
        return b.permute(2, 0, 1).contiguous().unsqueeze(0)


@layer("window_position_bias")
def _window_bias(M, prefix, k, xs):
    check_keys("window_position_bias", k, {"window", "heads", "cls"})
    wh, ww = pair(k["window"])
    return M.register(prefix, WindowPositionBias(M, int(wh), int(ww), int(k["heads"]),
                                                 bool(k.get("cls", False)))), 1


def shift_mask(H, W, wh, ww, sh, sw):
    """timm's Swin attn_mask (nW, N, N): 0 within a region of the rolled
    map, -100 across."""
    img = torch.zeros(1, H, W, 1)
    cnt = 0
    for hs in (slice(0, -wh), slice(-wh, -sh), slice(-sh, None)):
        for ws in (slice(0, -ww), slice(-ww, -sw), slice(-sw, None)):
            img[:, hs, ws, :] = cnt
            cnt += 1
    mw = window_partition(img, wh, ww).view(-1, wh * ww)
    m = mw.unsqueeze(1) - mw.unsqueeze(2)
    return m.masked_fill(m != 0, -100.0).masked_fill(m == 0, 0.0)


def window_partition(x, wh, ww):
    B, H, W, C = x.shape
    x = x.view(B, H // wh, wh, W // ww, ww, C).permute(0, 1, 3, 2, 4, 5)
    return x.contiguous().view(-1, wh, ww, C)


def window_reverse(w, wh, ww, H, W):
    C = w.shape[-1]
    x = w.view(-1, H // wh, W // ww, wh, ww, C).permute(0, 1, 3, 2, 4, 5)
    return x.contiguous().view(-1, H, W, C)


class WindowAttention(WindowPositionBias):
    """timm's SwinTransformerBlock attention on (B, H, W, C): roll by -shift,
    windows, WindowAttention (qkv, q scaled, + the position bias, + the
    shift mask, softmax, v, proj), windows merged, roll back. A window past
    the map shrinks to it, unshifted (_calc_window_shift)."""

    def __init__(self, M, C, H, W, heads, window, shift, qkv_bias):
        wh, ww = (window if H > window else H), (window if W > window else W)
        super().__init__(M, wh, ww, heads, False)
        self.win = [wh, ww]
        self.shift = [shift if H > window else 0, shift if W > window else 0]
        self.heads = heads
        self.qkv = nn.Linear(C, 3 * C, bias=qkv_bias)
        self.proj = nn.Linear(C, C)
        self.mask = None
        if any(self.shift):
            self.mask = M.shared_buffer("shift_mask.%dx%d.%dx%d.%dx%d" % (
                H, W, self.win[0], self.win[1], self.shift[0], self.shift[1]),
                lambda: shift_mask(H, W, self.win[0], self.win[1], *self.shift))

    def forward(self, x):
        _, H, W, C = x.shape
        (wh, ww), (sh, sw) = self.win, self.shift
        if sh or sw:
            x = torch.roll(x, shifts=(-sh, -sw), dims=(1, 2))
        xw = window_partition(x, wh, ww).view(-1, wh * ww, C)
        Bw, N, _ = xw.shape
        q, k, v = self.qkv(xw).reshape(Bw, N, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        attn = (q * (C // self.heads) ** -0.5) @ k.transpose(-2, -1)
        attn = attn + super().forward()
        if self.mask is not None:
            m = self.mask()
            attn = (attn.view(-1, m.shape[0], self.heads, N, N) + m.unsqueeze(1).unsqueeze(0))
            attn = attn.view(-1, self.heads, N, N)
        o = self.proj((attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(Bw, N, -1))
        x = window_reverse(o.view(-1, wh, ww, C), wh, ww, H, W)
        if sh or sw:
            x = torch.roll(x, shifts=(sh, sw), dims=(1, 2))
        return x


@layer("window_attention")
def _window_attention(M, prefix, k, xs):
    check_keys("window_attention", k, {"heads", "window", "shift", "qkv_bias"})
    _, H, W, C = xs[0].shape
    return M.register(prefix, WindowAttention(M, C, H, W, int(k["heads"]), int(k["window"]),
                                              int(k.get("shift", 0)),
                                              bool(k.get("qkv_bias", True)))), 1


def convit_rel(side):
    """timm's GPSA.get_rel_indices: (1, N, N, 3) of [dx, dy, dx^2 + dy^2]."""
    ind = torch.arange(side).view(1, -1) - torch.arange(side).view(-1, 1)
    indx = ind.repeat(side, side)
    indy = ind.repeat_interleave(side, dim=0).repeat_interleave(side, dim=1)
    return torch.stack((indx, indy, indx ** 2 + indy ** 2), dim=-1).float().unsqueeze(0)


class GPSA(nn.Module):
    """timm's GPSA (ConViT): content scores and positional scores (pos_proj
    of the relative indices), each softmaxed, mixed per head by
    sigmoid(gating_param), renormalized, times v, proj."""

    def __init__(self, M, D, N, heads):
        super().__init__()
        self.H = heads
        self.qk = nn.Linear(D, 2 * D, bias=False)
        self.v = nn.Linear(D, D, bias=False)
        self.proj = nn.Linear(D, D)
        self.pos_proj = nn.Linear(3, heads)
        self.gating_param = nn.Parameter(torch.ones(heads))
        side = int(round(math.sqrt(N)))
        self.rel = M.shared_buffer("convit_rel.%d" % N, lambda: convit_rel(side))

    def forward(self, x):
        B, N, C = x.shape
        qk = self.qk(x).reshape(B, N, 2, self.H, C // self.H).permute(2, 0, 3, 1, 4)
        q, k = qk[0], qk[1]
        pos = self.pos_proj(self.rel().expand(B, -1, -1, -1)).permute(0, 3, 1, 2)
        patch = ((q @ k.transpose(-2, -1)) * (C // self.H) ** -0.5).softmax(dim=-1)
        g = torch.sigmoid(self.gating_param.view(1, -1, 1, 1))
        attn = (1.0 - g) * patch + g * pos.softmax(dim=-1)
        attn = attn / attn.sum(dim=-1).unsqueeze(-1)
        v = self.v(x).reshape(B, N, self.H, C // self.H).permute(0, 2, 1, 3)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


@layer("gpsa")
def _gpsa(M, prefix, k, xs):
    check_keys("gpsa", k, {"heads"})
    return M.register(prefix, GPSA(M, xs[0].shape[-1], xs[0].shape[1], int(k["heads"]))), 1


def levit_offsets(res, stride):
    """timm's LeViT attention_bias_idxs (Nq, Nk): |dy| res + |dx| between a
    query on every stride-th row and column and each key of the grid."""
    def grid(step):
        a = torch.arange(0, res, step)
        return torch.stack(torch.meshgrid(a, a, indexing="ij")).flatten(1)
    rel = (grid(stride)[..., :, None] - grid(1)[..., None, :]).abs()
    return (rel[0] * res + rel[1]).int()


class LevitAttentionBias(nn.Module):
    """(H, Nq, Nk): LeViT's attention_biases[:, attention_bias_idxs], the
    table held (res^2, H) as tcbench's (the class's transposed)."""

    def __init__(self, M, heads, res, stride):
        super().__init__()
        self.attention_biases = nn.Parameter(torch.zeros(res * res, heads))
        self.idx = M.shared_buffer("levit_offsets.%d.%d" % (res, stride),
                                   lambda: levit_offsets(res, stride))

    def forward(self, x=None):
        return self.attention_biases[self.idx().long()].permute(2, 0, 1)


@layer("levit_attention_bias")
def _levit_bias(M, prefix, k, xs):
    check_keys("levit_attention_bias", k, {"heads", "resolution", "stride"})
    return M.register(prefix, LevitAttentionBias(M, int(k["heads"]), int(k["resolution"]),
                                                 int(k.get("stride", 1)))), 1


class OutlookAttention(nn.Module):
    """timm's OutlookAttention (VOLO) on (B, H, W, C): v unfolded into each
    pooled position's k x k neighbourhood, attention weights from `attn` on
    the average-pooled map, folded back (overlaps summed), proj."""

    def __init__(self, C, heads, kernel, padding, stride):
        super().__init__()
        self.heads, self.k, self.pad, self.stride = heads, kernel, padding, stride
        self.v = nn.Linear(C, C, bias=False)
        self.attn = nn.Linear(C, kernel ** 4 * heads)
        self.proj = nn.Linear(C, C)

    def forward(self, x):
        B, H, W, C = x.shape
        nh, k, st = self.heads, self.k, self.stride
        h, w = math.ceil(H / st), math.ceil(W / st)
        v = F.unfold(self.v(x).permute(0, 3, 1, 2), k, padding=self.pad, stride=st)
        v = v.reshape(B, nh, C // nh, k * k, h * w).permute(0, 1, 4, 3, 2)
        a = F.avg_pool2d(x.permute(0, 3, 1, 2), st, st, ceil_mode=True).permute(0, 2, 3, 1)
        a = self.attn(a).reshape(B, h * w, nh, k * k, k * k).permute(0, 2, 1, 3, 4)
        a = (a * (C // nh) ** -0.5).softmax(dim=-1)
        o = (a @ v).permute(0, 1, 4, 3, 2).reshape(B, C * k * k, h * w)
        o = F.fold(o, output_size=(H, W), kernel_size=k, padding=self.pad, stride=st)
        return self.proj(o.permute(0, 2, 3, 1))


@layer("outlook_attention")
def _outlook(M, prefix, k, xs):
    check_keys("outlook_attention", k, {"heads", "kernel", "padding", "stride"})
    return M.register(prefix, OutlookAttention(xs[0].shape[-1], int(k["heads"]),
                                               int(k.get("kernel", 3)), int(k.get("padding", 1)),
                                               int(k.get("stride", 2)))), 1


class XCA(nn.Module):
    """timm's XCA (XCiT): attention over channels, q and k L2-normalized
    over the tokens, times temperature (heads, 1, 1), proj."""

    def __init__(self, C, heads, qkv_bias):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(C, 3 * C, bias=qkv_bias)
        self.temperature = nn.Parameter(torch.ones(heads, 1, 1))
        self.proj = nn.Linear(C, C)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(
            2, 0, 3, 4, 1).unbind(0)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        attn = ((q @ k.transpose(-2, -1)) * self.temperature).softmax(dim=-1)
        return self.proj((attn @ v).permute(0, 3, 1, 2).reshape(B, N, C))


@layer("xca_attention")
def _xca(M, prefix, k, xs):
    check_keys("xca_attention", k, {"heads", "qkv_bias"})
    return M.register(prefix, XCA(xs[0].shape[-1], int(k["heads"]),
                                  bool(k.get("qkv_bias", True)))), 1


def fourier_positions(hidden, H, W):
    """timm's PositionalEncodingFourier before its token_projection:
    (1, 2 hidden, H, W), the rows' features then the columns'."""
    y = torch.arange(1, H + 1).float().view(1, H, 1).expand(1, H, W)
    x = torch.arange(1, W + 1).float().view(1, 1, W).expand(1, H, W)
    y = y / (y[:, -1:, :] + 1e-6) * (2 * math.pi)
    x = x / (x[:, :, -1:] + 1e-6) * (2 * math.pi)
    dim_t = 10000 ** (2 * torch.div(torch.arange(hidden), 2, rounding_mode="floor").float()
                      / hidden)

    def feats(e):
        p = e[:, :, :, None] / dim_t
        return torch.stack([p[..., 0::2].sin(), p[..., 1::2].cos()], dim=4).flatten(3)
    return torch.cat((feats(y), feats(x)), dim=3).permute(0, 3, 1, 2).contiguous()


@layer("fourier_positions")
def _fourier(M, prefix, k, xs):
    check_keys("fourier_positions", k, {"hidden", "grid"})
    hid, (h, w) = int(k.get("hidden", 32)), pair(k["grid"])
    t = M.shared_buffer("fourier_positions.%d.%dx%d" % (hid, h, w),
                        lambda: fourier_positions(hid, int(h), int(w)))
    return (lambda x: t()), 1


def make_divisible(v, divisor=8):
    """timm's make_divisible (min_value the divisor, round_limit 0.9)."""
    n = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return n + divisor if n < 0.9 * v else n


def rel_logits_1d(q, rel_k, other, permute):
    """timm's rel_logits_1d: q (B, H, W, d) against the relative table
    (2 win - 1, d) of the keys along W, by its pad/flatten/pad/reshape/slice
    trick; expanded over the `other` axis' keys and permuted to (B, qh, qw,
    kh, kw)."""
    B, H, W, _ = q.shape
    R = rel_k.shape[0]
    win = (R + 1) // 2
    x = (q @ rel_k.transpose(-1, -2)).reshape(-1, W, R)
    x = F.pad(F.pad(x, [0, 1]).flatten(1), [0, R - W]).reshape(-1, W + 1, R)
    x = x[:, :W, win - 1:].reshape(B, H, 1, W, win).expand(-1, -1, other, -1, -1)
    return x.permute(permute)


class PosEmbedRel(nn.Module):
    """timm's PosEmbedRel (BoTNet's and HaloNet's): relative logits of the
    queries of a bh x bw block against the keys of a kh x kw window."""

    def __init__(self, kh, kw, d):
        super().__init__()
        self.height_rel = nn.Parameter(torch.zeros(2 * kh - 1, d))
        self.width_rel = nn.Parameter(torch.zeros(2 * kw - 1, d))

    def forward(self, q, bh, bw):
        kh, kw = (self.height_rel.shape[0] + 1) // 2, (self.width_rel.shape[0] + 1) // 2
        lead = q.shape[:-2]
        q = q.reshape(-1, bh, bw, q.shape[-1])
        rw = rel_logits_1d(q, self.width_rel, kh, (0, 1, 3, 2, 4))
        rh = rel_logits_1d(q.transpose(1, 2), self.height_rel, kw, (0, 3, 1, 4, 2))
        return (rh + rw).reshape(lead + (bh * bw, kh * kw))


def _map_attention_dims(k, C, heads):
    """(heads, qk head dim, v head dim) of timm's BottleneckAttn and HaloAttn."""
    out = int(k.get("out", C))
    dqk = int(k.get("dim_head", 0)) or make_divisible(out) // heads
    return heads, dqk, out // heads


class BottleneckAttn(nn.Module):
    """timm's BottleneckAttn (BoTNet): global self-attention over a fixed
    H x W map, relative position logits, 2x2 average pool for stride 2."""

    def __init__(self, C, H, W, heads, dqk, dv, stride):
        super().__init__()
        self.heads, self.dqk, self.dv, self.stride = heads, dqk, dv, stride
        self.qkv = nn.Conv2d(C, heads * (2 * dqk + dv), 1, bias=False)
        self.pos_embed = PosEmbedRel(H, W, dqk)

    def forward(self, x):
        B, _, H, W = x.shape
        nh = self.heads
        q, k, v = torch.split(self.qkv(x), [nh * self.dqk, nh * self.dqk, nh * self.dv], dim=1)
        q = q.reshape(B * nh, self.dqk, -1).transpose(-1, -2)
        k = k.reshape(B * nh, self.dqk, -1)
        v = v.reshape(B * nh, self.dv, -1).transpose(-1, -2)
        attn = (q @ k) * self.dqk ** -0.5 + self.pos_embed(q, H, W)
        out = (attn.softmax(dim=-1) @ v).transpose(-1, -2).reshape(B, nh * self.dv, H, W)
        return F.avg_pool2d(out, 2, 2) if self.stride == 2 else out


@layer("bottleneck_attention")
def _bottleneck(M, prefix, k, xs):
    check_keys("bottleneck_attention", k, {"heads", "dim_head", "out", "stride"})
    _, C, H, W = xs[0].shape
    heads, dqk, dv = _map_attention_dims(k, C, int(k.get("heads", 4)))
    return M.register(prefix, BottleneckAttn(C, H, W, heads, dqk, dv,
                                             int(k.get("stride", 1)))), 1


class HaloAttn(nn.Module):
    """timm's HaloAttn (HaloNet): block x block query blocks, each against
    its window of block + 2 halo keys a side in the zero-padded map."""

    def __init__(self, C, heads, dqk, dv, stride, block, halo):
        super().__init__()
        self.heads, self.dqk, self.dv = heads, dqk, dv
        self.block, self.halo, self.win = block, halo, block + 2 * halo
        self.pool = stride > 1 and block % stride != 0
        self.bstride = 1 if stride == 1 or self.pool else stride
        self.bds = block // self.bstride
        self.q = nn.Conv2d(C, heads * dqk, 1, stride=self.bstride, bias=False)
        self.kv = nn.Conv2d(C, heads * (dqk + dv), 1, bias=False)
        self.pos_embed = PosEmbedRel(self.win, self.win, dqk)

    def forward(self, x):
        B, _, H, W = x.shape
        nh, bs, bds, win = self.heads, self.block, self.bds, self.win
        nhb, nwb = H // bs, W // bs
        nb = nhb * nwb
        q = self.q(x).reshape(-1, self.dqk, nhb, bds, nwb, bds).permute(0, 1, 3, 5, 2, 4)
        q = q.reshape(B * nh, self.dqk, -1, nb).transpose(1, 3)
        kv = F.pad(self.kv(x), [self.halo] * 4)
        kv = kv.unfold(2, win, bs).unfold(3, win, bs).reshape(
            B * nh, self.dqk + self.dv, nb, -1).permute(0, 2, 3, 1)
        k, v = torch.split(kv, [self.dqk, self.dv], dim=-1)
        attn = (q @ k.transpose(-1, -2)) * self.dqk ** -0.5 + self.pos_embed(q, bds, bds)
        out = (attn.softmax(dim=-1) @ v).transpose(1, 3)
        out = out.reshape(-1, bds, bds, nhb, nwb).permute(0, 3, 1, 4, 2).contiguous().view(
            B, nh * self.dv, H // self.bstride, W // self.bstride)
        return F.avg_pool2d(out, 2, 2) if self.pool else out


@layer("halo_attention")
def _halo(M, prefix, k, xs):
    check_keys("halo_attention", k, {"heads", "dim_head", "out", "stride", "block", "halo"})
    heads, dqk, dv = _map_attention_dims(k, xs[0].shape[1], int(k.get("heads", 8)))
    return M.register(prefix, HaloAttn(xs[0].shape[1], heads, dqk, dv, int(k.get("stride", 1)),
                                       int(k.get("block", 8)), int(k.get("halo", 3)))), 1


def relative_buckets(T, S, nb, md, bi):
    """T5Attention._relative_position_bucket of key s - query t, (T, S)."""
    rel = torch.arange(S)[None, :] - torch.arange(T)[:, None]
    ret = torch.zeros_like(rel)
    if bi:
        nb //= 2
        ret = (rel > 0).long() * nb
        rel = rel.abs()
    else:
        rel = -torch.clamp(rel, max=0)
    exact = nb // 2
    small = rel < exact
    large = exact + (torch.log(rel.float() / exact) / math.log(md / exact)
                     * (nb - exact)).long()
    large = torch.clamp(large, max=nb - 1)
    return ret + torch.where(small, rel, large)


@layer("relative_position_bias")
def _rpb(M, prefix, k, xs):
    check_keys("relative_position_bias", k, {"buckets", "max_distance", "heads", "bidirectional"})
    T, S = xs[0].shape[1], xs[-1].shape[1]
    return M.register(prefix, RelativePositionBias(M, int(k["buckets"]), int(k["max_distance"]),
                                                   int(k["heads"]),
                                                   bool(k.get("bidirectional", True)), T, S)), 1


def sinusoid_table(mx, D, form, pad):
    """tcbench's constant position tables (engine/model/init.c, sinusoid),
    in f64, rounded to f32."""
    p = torch.arange(mx, dtype=torch.float64)[:, None]
    c = torch.arange(D)[None, :]
    if form == "interleaved":
        ang = p / torch.pow(10000.0, (c - c % 2).double() / D)
        t = torch.where(c % 2 == 1, torch.cos(ang), torch.sin(ang))
    elif form == "pegasus":
        s_ = (D + 1) // 2
        kk = torch.where(c < s_, c, c - s_).double()
        ang = p / torch.pow(10000.0, 2.0 * kk / D)
        t = torch.where(c < s_, torch.sin(ang), torch.cos(ang))
    else:
        h = D // 2
        kk = torch.where(c < h, c, c - h).double()
        ang = p * torch.exp(-kk * math.log(10000.0) / (h - 1))
        t = torch.where(c < h, torch.sin(ang), torch.cos(ang))
        t = torch.where(c >= 2 * h, torch.zeros_like(t), t)
        if pad >= 0:
            t[pad] = 0
    return t.float()


class SinusoidalPositions(nn.Module):
    def __init__(self, M, mx, D, form, pad, offset, parameter):
        super().__init__()
        self.offset = offset
        if parameter:  # a frozen parameter of its own (Pegasus, Speech2Text2)
            self.weight = nn.Parameter(sinusoid_table(mx, D, form, pad), requires_grad=False)
            self.table = lambda: self.weight
        else:
            self.table = M.shared_buffer("sinusoid_%s.%dx%d.pad%d" % (form, mx, D, pad),
                                         lambda: sinusoid_table(mx, D, form, pad))

    def forward(self, x):
        T = x.shape[-2]
        return x + self.table()[self.offset:self.offset + T]


@layer("sinusoidal_positions")
def _sinusoidal(M, prefix, k, xs):
    check_keys("sinusoidal_positions", k, {"max", "offset", "padding_idx", "form", "parameter"})
    mod = SinusoidalPositions(M, int(k["max"]), xs[0].shape[-1], str(k.get("form", "fairseq")),
                              int(k.get("padding_idx", -1)), int(k.get("offset", 0)),
                              bool(k.get("parameter", False)))
    if k.get("parameter", False):
        return M.register(prefix, mod), 1
    return mod, 1


class BoxEmbedding(nn.Module):
    """LayoutLM's 2-D position embeddings: x + X[x0] + Y[y0] + X[x1] + Y[y1]
    + H[y1 - y0] + W[x1 - x0], in that order."""

    def __init__(self, mx, D):
        super().__init__()
        for n in ("x", "y", "h", "w"):
            self.add_module(n, nn.Embedding(mx, D))

    def forward(self, t, boxes):
        b = boxes.long()
        x0, y0, x1, y1 = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        return (t + self.x(x0) + self.y(y0) + self.x(x1) + self.y(y1) + self.h(y1 - y0)
                + self.w(x1 - x0))


@layer("box_embedding")
def _box(M, prefix, k, xs):
    check_keys("box_embedding", k, {"max"})
    return M.register(prefix, BoxEmbedding(int(k["max"]), xs[0].shape[-1])), 1


@layer("fft2_real")
def _fft2_real(M, prefix, k, xs):
    return (lambda x: torch.fft.fftn(x, dim=(-2, -1)).real), 1



def _pool(kind):
    def b(M, prefix, k, xs):
        ks = pair(k["kernel"])
        st = pair(k.get("stride", k["kernel"]))
        pd = pair(k.get("padding", 0))
        ceil = bool(k.get("ceil_mode", False))
        if kind == "max":
            return (lambda x: F.max_pool2d(x, ks, st, pd, ceil_mode=ceil)), 1
        cip = bool(k.get("count_include_pad", True))
        return (lambda x: F.avg_pool2d(x, ks, st, pd, ceil_mode=ceil, count_include_pad=cip)), 1
    return b


LAYERS["max_pool2d"] = _pool("max")
LAYERS["avg_pool2d"] = _pool("avg")


@layer("global_avg_pool")
def _gap(M, prefix, k, xs):
    return (lambda x: F.adaptive_avg_pool2d(x, 1)), 1


@layer("mean")
def _mean(M, prefix, k, xs):
    a, kd = int(k["axis"]), bool(k.get("keepdim", False))
    return (lambda x: x.mean(a, keepdim=kd)), 1


@layer("flatten")
def _flatten(M, prefix, k, xs):
    s, e = int(k.get("start", 1)), int(k.get("end", -1))
    return (lambda x: torch.flatten(x, s, e)), 1


@layer("reshape")
def _reshape(M, prefix, k, xs):
    shape = [int(v) for v in k["shape"]]
    return (lambda x: x.reshape(shape)), 1


@layer("permute")
def _permute(M, prefix, k, xs):
    d = [int(v) for v in k["dims"]]
    return (lambda x: x.permute(d)), 1


@layer("tile")
def _tile(M, prefix, k, xs):
    r = [int(v) for v in k["reps"]]
    return (lambda x: x.repeat(r)), 1


def _binary(op):
    def b(M, prefix, k, xs):
        if "value" in k:
            v = k["value"]
            if op is torch.div:
                inv = 1.0 / v
                return (lambda x: x * inv), 1
            return (lambda x: op(x, v)), 1
        return (lambda a, c: op(a, c)), 1
    return b


LAYERS["add"] = _binary(torch.add)
LAYERS["sub"] = _binary(torch.sub)
LAYERS["mul"] = _binary(torch.mul)
LAYERS["div"] = _binary(torch.div)


@layer("concat")
def _concat(M, prefix, k, xs):
    a = int(k.get("axis", -1))
    return (lambda *t: torch.cat(t, dim=a)), 1


@layer("split")
def _split(M, prefix, k, xs):
    a = int(k.get("axis", -1))
    L = xs[0].shape[a]
    if "sizes" in k:
        sizes = [int(v) for v in k["sizes"]]
        if -1 in sizes:
            sizes[sizes.index(-1)] = L - (sum(sizes) + 1)
    else:
        c = int(k.get("chunks", 2))
        sizes = [L // c] * c
    return (lambda x: tuple(torch.split(x, sizes, dim=a))), len(sizes)


@layer("slice")
def _slice(M, prefix, k, xs):
    a, st, ln = int(k["axis"]), int(k.get("start", 0)), int(k["length"])
    return (lambda x: x.narrow(a, st, ln)), 1


@layer("softmax")
def _softmax(M, prefix, k, xs):
    a = int(k.get("axis", -1))
    return (lambda x: torch.softmax(x, a)), 1


@layer("log_softmax")
def _log_softmax(M, prefix, k, xs):
    a = int(k.get("axis", -1))
    return (lambda x: torch.log_softmax(x, a)), 1


class ClsToken(nn.Module):
    def __init__(self, d, dist):
        super().__init__()
        self.token = nn.Parameter(torch.zeros(1, 1, d))
        self.dist_token = nn.Parameter(torch.zeros(1, 1, d)) if dist else None

    def forward(self, x):
        B = x.shape[0]
        ts = [self.token.expand(B, -1, -1)]
        if self.dist_token is not None:
            ts.append(self.dist_token.expand(B, -1, -1))
        return torch.cat(ts + [x], dim=1)


@layer("cls_token")
def _cls(M, prefix, k, xs):
    return M.register(prefix, ClsToken(xs[0].shape[-1], bool(k.get("dist_token", False)))), 1


@layer("matmul")
def _matmul(M, prefix, k, xs):
    return torch.matmul, 1


class Affine(nn.Module):
    def __init__(self, d, names):
        super().__init__()
        self.names = names
        setattr(self, names[0], nn.Parameter(torch.ones(d)))
        setattr(self, names[1], nn.Parameter(torch.zeros(d)))

    def forward(self, x):
        return x * getattr(self, self.names[0]) + getattr(self, self.names[1])


@layer("no_norm")
def _no_norm(M, prefix, k, xs):
    return M.register(prefix, Affine(xs[0].shape[-1], ("weight", "bias"))), 1


@layer("affine")
def _affine(M, prefix, k, xs):
    return M.register(prefix, Affine(xs[0].shape[-1], ("alpha", "beta"))), 1


class AddBuffer(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("buffer", torch.zeros(n))

    def forward(self, x):
        return x + self.buffer


@layer("add_buffer")
def _add_buffer(M, prefix, k, xs):
    return M.register(prefix, AddBuffer(xs[0].shape[-1])), 1


class Param(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        return self.weight


@layer("parameter")
def _parameter(M, prefix, k, xs):
    return M.register(prefix, Param([int(v) for v in k["shape"]])), 1


@layer("upsample")
def _upsample(M, prefix, k, xs):
    s, mode = int(k["scale"]), str(k.get("mode", "nearest"))
    ac = bool(k.get("align_corners", False)) if mode == "bilinear" else None
    return (lambda x: F.interpolate(x, scale_factor=s, mode=mode, align_corners=ac)), 1


def bicubic_table(n_out, n_in):
    """F.interpolate's bicubic weights (align_corners false) along one axis,
    (n_out, n_in): the resize of an identity image along that axis."""
    eye = torch.eye(n_in).reshape(1, 1, n_in, n_in)
    return F.interpolate(eye, size=(n_out, n_in), mode="bicubic",
                         align_corners=False)[0, 0]


@layer("interpolate")
def _interpolate(M, prefix, k, xs):
    check_keys("interpolate", k, {"size", "mode", "align_corners"})
    size, mode = tuple(pair(k["size"])), str(k.get("mode", "bicubic"))
    if mode == "bilinear":
        ac = bool(k.get("align_corners", False))
        return (lambda x: F.interpolate(x, size=size, mode="bilinear", align_corners=ac)), 1
    # tcbench resizes by two GEMMs with constant tables (buffers
    # bicubic.OUTxIN, an axis at its size skipped); torch, as CrossViT, by
    # F.interpolate: the tables are held (and compared) only
    for n_in, n_out in zip(xs[0].shape[2:], size):
        if n_in != n_out:
            M.shared_buffer("bicubic.%dx%d" % (n_out, n_in),
                            lambda n_out=n_out, n_in=n_in: bicubic_table(n_out, n_in))
    if tuple(xs[0].shape[2:]) == size:
        return (lambda x: x), 1
    return (lambda x: F.interpolate(x, size=size, mode="bicubic", align_corners=False)), 1


class EmbeddingBag(nn.EmbeddingBag):
    """nn.EmbeddingBag in sum mode; indices (B, L) are bags of L, by the
    offsets 0, L, 2L, ... PyTorch makes for them (tcbench's shared buffer
    embedding_bag.offsets_B_L)."""

    def __init__(self, M, num, dim, ids):
        super().__init__(num, dim, mode="sum")
        self.offsets = None
        if ids.dim() == 2:
            B, L = ids.shape
            self.offsets = M.shared_buffer("embedding_bag.offsets_%d_%d" % (B, L),
                                           lambda: torch.arange(B, dtype=ids.dtype) * L)

    def forward(self, ids, offsets=None):
        if self.offsets is not None:
            ids, offsets = ids.flatten(), self.offsets()
        return F.embedding_bag(ids, self.weight, offsets, mode="sum")


@layer("embedding_bag")
def _embedding_bag(M, prefix, k, xs):
    check_keys("embedding_bag", k, {"num", "dim", "mode"})
    if str(k.get("mode", "sum")) != "sum":
        raise BuildError("embedding_bag: mode %s (tcbench builds sum only)" % k["mode"])
    return M.register(prefix, EmbeddingBag(M, int(k["num"]), int(k["dim"]), xs[0])), 1


@layer("dot_interaction")
def _dot_interaction(M, prefix, k, xs):
    """DLRM's interact_features (dot): the features (B, F D) as T (B, F, D),
    T T^T's pairs below the diagonal (on it too with `self`) after the
    dense features (B, D)."""
    check_keys("dot_interaction", k, {"self"})
    off = 1 if k.get("self", False) else 0
    n = xs[0].shape[1] // xs[1].shape[1]
    li = torch.tensor([i for i in range(n) for j in range(i + off)])
    lj = torch.tensor([j for i in range(n) for j in range(i + off)])

    def f(t, x):
        T = t.view(x.shape[0], -1, x.shape[1])
        return torch.cat([x, torch.bmm(T, T.transpose(1, 2))[:, li, lj]], dim=1)
    return f, 1


class FlowGrid(nn.Module):
    """Super SloMo's backWarp grid: flow (N, 2, H, W) in pixels -> (N, H, W,
    2) of 2 ((pixel + flow) / size - 0.5), x from channel 0 and the column, y
    from channel 1 and the row (shared buffers pixel_grid.{x,y}.HxW)."""

    def __init__(self, M, H, W):
        super().__init__()
        gy, gx = torch.meshgrid(torch.arange(H).float(), torch.arange(W).float(), indexing="ij")
        self.gx = M.shared_buffer("pixel_grid.x.%dx%d" % (H, W), lambda: gx.contiguous())
        self.gy = M.shared_buffer("pixel_grid.y.%dx%d" % (H, W), lambda: gy.contiguous())

    def forward(self, flow):
        H, W = flow.shape[2:]
        x = 2 * ((self.gx().unsqueeze(0).expand_as(flow[:, 0]) + flow[:, 0]) / W - 0.5)
        y = 2 * ((self.gy().unsqueeze(0).expand_as(flow[:, 1]) + flow[:, 1]) / H - 0.5)
        return torch.stack((x, y), dim=3)


@layer("flow_grid")
def _flow_grid(M, prefix, k, xs):
    check_keys("flow_grid", k, set())
    return M.register(prefix, FlowGrid(M, xs[0].shape[2], xs[0].shape[3])), 1


@layer("grid_sample")
def _grid_sample(M, prefix, k, xs):
    check_keys("grid_sample", k, {"padding", "align_corners"})
    pad, ac = str(k.get("padding", "zeros")), bool(k.get("align_corners", False))
    return (lambda x, g: F.grid_sample(x, g, mode="bilinear", padding_mode=pad,
                                       align_corners=ac)), 1


def relative_sinusoid_table(T, dim):
    """XLNet's relative_positional_encoding (attn_type bi, no memory): row
    p is relative position T - p, [sin | cos] of it times 10000^(-2i/dim)."""
    inv_freq = 1 / torch.pow(10000, torch.arange(0, dim, 2.0) / dim)
    s = torch.einsum("i,d->id", torch.arange(T, -T, -1.0), inv_freq)
    return torch.cat([torch.sin(s), torch.cos(s)], dim=-1)


@layer("relative_sinusoid")
def _relative_sinusoid(M, prefix, k, xs):
    check_keys("relative_sinusoid", k, {"dim"})
    T, dim = xs[0].shape[-2], int(k.get("dim", xs[0].shape[-1]))
    table = M.shared_buffer("relative_sinusoid.%dx%d" % (2 * T, dim),
                            lambda: relative_sinusoid_table(T, dim))
    return (lambda x: table()), 1


class LSTM(nn.LSTM):
    """nn.LSTM's output sequence from a zero state."""

    def forward(self, x):
        return super().forward(x)[0]


@layer("lstm")
def _lstm(M, prefix, k, xs):
    check_keys("lstm", k, {"hidden", "layers", "bidirectional", "batch_first"})
    return M.register(prefix, LSTM(xs[0].shape[-1], int(k["hidden"]),
                                   num_layers=int(k.get("layers", 1)),
                                   bidirectional=bool(k.get("bidirectional", False)),
                                   batch_first=bool(k.get("batch_first", True)))), 1


@layer("pad")
def _pad(M, prefix, k, xs):
    mode, val = str(k.get("mode", "constant")), float(k.get("value", 0))
    if "pads" in k:
        pads = [int(v) for v in k["pads"]]
    else:
        nd = xs[0].dim()
        a = int(k["axis"]) % nd
        pads = [0, 0] * (nd - 1 - a) + [int(k.get("before", 0)), int(k.get("after", 0))]
    if mode == "constant":
        return (lambda x: F.pad(x, pads, "constant", val)), 1
    return (lambda x: F.pad(x, pads, mode)), 1


# ------------------------------------------------------------------ safetensors and checks

def load_weights(path):
    from safetensors import safe_open
    from safetensors.torch import load_file
    with safe_open(path, framework="pt") as f:
        meta = f.metadata() or {}
    return load_file(path), meta


def rel_err(a, b):
    a = a.detach().double().flatten()
    b = b.detach().double().flatten()
    if a.shape != b.shape:
        return float("inf")
    nb = b.norm().item()
    d = (a - b).norm().item()
    if nb == 0:
        return d
    return d / nb


def load_case_weights(model, tensors):
    """Loads tcbench's parameters and buffers by name. Returns (missing,
    unexpected, buffer notes): names PyTorch's module has and the file lacks,
    names the file has and the module lacks, and shared buffers whose
    values (as this builder computes them) differ from tcbench's."""
    file_names = {n for n in tensors if not n.startswith(("input.", "output.", "train."))}
    sd = model.state_dict()
    mine = set(sd)
    notes = []
    for n in sorted(mine & file_names):
        a, b = sd[n], tensors[n]
        if tuple(a.shape) != tuple(b.shape):
            raise BuildError("%s: PyTorch's module has shape %s, the file %s"
                             % (n, tuple(a.shape), tuple(b.shape)))
        if n in dict(model.named_buffers()) and not n.endswith(("running_mean", "running_var")):
            if a.dtype == torch.bool or b.dtype == torch.bool:
                if not torch.equal(a.bool(), b.bool()):
                    notes.append("%s: %d of %d values differ" % (n, int((a.bool() != b.bool()).sum()),
                                                                 a.numel()))
            else:
                e = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
                if e > 1e-6:
                    notes.append("%s: max |diff| %.3g" % (n, e))
    with torch.no_grad():
        for n in mine & file_names:
            sd[n].copy_(tensors[n].to(sd[n].dtype))
    return sorted(mine - file_names), sorted(file_names - mine), notes


def case_inputs(model, tensors):
    xs = []
    for name, shape, dtype, rng in model.input_specs:
        t = tensors["input." + name]
        if not t.is_floating_point() and t.dtype != torch.bool:
            t = t.long()
        xs.append(t)
    return xs


def parse_streams(meta, args_streams, case):
    """tcbench's dropout mask streams, one per dropout site in build order:
    the file's metadata `dropout_streams`, or --dropout-streams CASE=a,b,..."""
    s = None
    for item in args_streams or []:
        c, _, v = item.partition("=")
        if c == case:
            s = v
    if s is None:
        s = meta.get("dropout_streams")
    if s is None:
        return None
    return [int(x) for x in s.replace(" ", "").split(",") if x]


def build_loaded(case, tensors, args, notes=None):
    """The case's model with tcbench's values loaded: (model, inputs)."""
    model = YamlModel(case["model_path"], case["params"], case["batch"], loss=case["loss"],
                      attention=args.attention)
    missing, unexpected, bnotes = load_case_weights(model, tensors)
    if notes is not None:
        notes["missing"], notes["unexpected"], notes["buffers"] = missing, unexpected, bnotes
    return model, case_inputs(model, tensors)


def snapshot(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def restore(model, state):
    """Copies a snapshot back in place (BatchNorm's loader would add
    num_batches_tracked)."""
    with torch.no_grad():
        for k, v in model.state_dict().items():
            v.copy_(state[k])


def train_pass(model, xs, masks, dp=None):
    """One forward and backward in train mode: (loss, {name: gradient}).
    With dp ({max_grad_norm: C}, a dp_sgd case) the gradient is DP-SGD's
    without its noise, as tcbench writes it: each sample's gradient (of B
    times its share of the mean loss) clipped to C over all parameters
    together, by min(1, C / (norm + 1e-6)) as opacus, summed, divided by B."""
    model.train()
    model.dropout_masks = masks
    model.zero_grad(set_to_none=True)
    if dp is None:
        loss = model.forward_loss(*xs)
        loss.backward()
        grads = {n: p.grad.detach() for n, p in model.named_parameters() if p.grad is not None}
    else:
        env = model.run(xs)
        loss = model.compute_loss(env)
        per = model.per_sample_losses(env)
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        C = float(dp.get("max_grad_norm", 1.0))
        grads = {}
        for i in range(per.shape[0]):
            gs = torch.autograd.grad(per[i], [p for _, p in named], retain_graph=True,
                                     allow_unused=True)
            norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in gs if g is not None))
            f = min(1.0, C / (norm + 1e-6))
            for (n, _), g in zip(named, gs):
                if g is not None:
                    grads[n] = grads.get(n, 0) + g.detach() * f
        # what tcbench writes as train.grad: the clipped sum over the batch
        # divided by B, without the noise (the optimizer's gradient but for
        # the noise term)
        grads = {n: g / per.shape[0] for n, g in grads.items()}
    model.dropout_masks = None
    model.zero_grad(set_to_none=True)
    return loss.detach(), grads


def grad_errors(grads, refs):
    """Each gradient's error against tcbench's: ||a - b|| / ||b||, or for a
    gradient that is zero in exact arithmetic (a key bias before a softmax, a
    bias before a batch norm in training: rounding noise on both sides)
    against GRAD_FLOOR of the whole gradient's norm when that is larger."""
    total = math.sqrt(sum(float(t.double().norm()) ** 2 for t in refs.values()))
    errs, floored = {}, []
    for n, ref in refs.items():
        g = grads[n]
        nb = float(ref.double().norm())
        d = float((g.double() - ref.double()).norm()) \
            if tuple(g.shape) == tuple(ref.shape) else float("inf")
        den = max(nb, GRAD_FLOOR * total)
        if nb < GRAD_FLOOR * total:
            floored.append("%s (|g| %.1e of the total)" % (n, nb / total if total else 0.0))
        errs[n] = d / den if den > 0 else d
    return errs, floored


def check_case(case, wdir, args):
    """Builds the case, loads its file and compares. Returns a result dict
    and (model, inputs, metadata) for timing."""
    r = {"case": case["name"], "status": "FAIL", "notes": []}
    path = os.path.join(wdir, case["name"] + ".safetensors")
    if not os.path.exists(path):
        r["status"] = "SKIP"
        r["notes"].append("no %s (run `tcbench weights`)" % path)
        return r, None
    tensors, meta = load_weights(path)
    if (meta.get("size") or None) != (args.size or None):
        r["status"] = "ERROR"
        r["notes"].append("%s was written with --size %s, and this run has --size %s"
                          % (path, meta.get("size") or "(none)", args.size or "(none)"))
        return r, None
    names = {}
    try:
        model, xs = build_loaded(case, tensors, args, names)
    except Unsupported as e:
        r["status"] = "SKIP"
        r["notes"].append(str(e))
        return r, None
    if str(meta.get("batch", case["batch"])) != str(case["batch"]):
        r["notes"].append("the file's batch is %s, the case's %s (--size?)"
                          % (meta.get("batch"), case["batch"]))
    missing, unexpected = names["missing"], names["unexpected"]
    # an unused layer's buffers (a batch norm's running statistics): the
    # class holds them, tcbench writes the layer's parameters only
    bufs = dict(model.named_buffers())
    unused_bufs = [n for n in missing if n in bufs and
                   any(n.startswith(u + ".") for u in model.unused_prefixes)]
    if unused_bufs:
        r["notes"].append("torch-only buffers of unused layers (tcbench keeps an unused layer's "
                          "parameters only): %s" % ", ".join(unused_bufs))
    missing = [n for n in missing if n not in unused_bufs]
    r["missing"], r["unexpected"] = missing, unexpected
    r["notes"].extend("torch-only name: %s" % n for n in missing)
    r["notes"].extend("tcbench-only name: %s" % n for n in unexpected)
    r["notes"].extend("buffer %s" % n for n in names["buffers"])
    # inference
    model.eval()
    with torch.no_grad():
        outs = model(*xs)
    nref = int(meta.get("outputs", len(outs)))
    errs = []
    for i in range(max(nref, len(outs))):
        ref = tensors.get("output.%d" % i)
        if ref is None or i >= len(outs):
            errs.append(float("inf"))
            r["notes"].append("output %d: %s" % (i, "missing in the file" if ref is None
                                                 else "PyTorch's model has no such output"))
            continue
        errs.append(rel_err(outs[i], ref))
    r["infer"] = max(errs) if errs else float("nan")
    tol_i = float(case["tolerance"].get("infer", TOL_INFER)) if args.case_tolerance else TOL_INFER
    ok = r["infer"] <= tol_i and not missing and not unexpected
    starred = False
    # one training step, from the same values (restored afterwards: batch
    # norm's running statistics move)
    if "train.loss" in tensors:
        state0 = snapshot(model)
        streams = parse_streams(meta, args.dropout_streams, case["name"])
        masks, step = None, int(meta.get("dropout_step", 1))
        if model.dropout_sites:
            if streams is None or len(streams) != len(model.dropout_sites):
                r["notes"].append(
                    "dropout: %d sites and tcbench's mask streams %s: PyTorch draws its own "
                    "masks, so the training step cannot match" % (
                        len(model.dropout_sites), "are not in the file (metadata dropout_streams)"
                        if streams is None else "given for %d" % len(streams)))
            else:
                masks = {site: tcbench_dropout_scale(st, step, shape, p)
                         for (site, p, shape, _), st in zip(model.dropout_sites, streams)}
        loss, grads = train_pass(model, xs, masks, case.get("dp_sgd"))
        restore(model, state0)
        r["loss"] = rel_err(loss, tensors["train.loss"])
        refs = {n: tensors["train.grad." + n] for n in grads if "train.grad." + n in tensors}
        for n in grads:
            if n not in refs:
                r["notes"].append("no train.grad.%s in the file" % n)
        named = dict(model.named_parameters())
        for n in tensors:
            if n.startswith("train.grad.") and n[len("train.grad."):] not in grads:
                r["notes"].append(("tcbench has a gradient of %s, PyTorch none" if n[11:] in named
                                   else "gradient of %s, which PyTorch's module does not have")
                                  % n[11:])
                r["grad_missing"] = True
        gerr, floored = grad_errors(grads, refs)
        if floored:
            r["notes"].append("%d near-zero gradients (their norm below %g of the whole "
                              "gradient's) judged against that floor: %s" % (
                                  len(floored), GRAD_FLOOR, ", ".join(floored) if args.verbose
                                  else ", ".join(floored[:3]) + (", ..." if len(floored) > 3
                                                                 else "")))
        wname = max(gerr, key=lambda n: gerr[n]) if gerr else ""
        r["grad"], r["grad_name"] = (gerr[wname], wname) if gerr else (0.0, "")
        bad = [n for n, e in gerr.items() if not e <= TOL_TRAIN]
        loss_bad = not r["loss"] <= TOL_TRAIN
        if (bad or loss_bad) and not args.no_fp64 and (masks is not None or not model.dropout_sites):
            # who is nearer the exact answer? PyTorch in fp64 on the same
            # values and masks: an item passes when tcbench's error against it
            # is within the tolerance or within twice PyTorch fp32's own
            m64, x64 = build_loaded(case, tensors, args)
            m64 = m64.double()
            x64 = [x.double() if x.is_floating_point() else x for x in x64]
            l64, g64 = train_pass(m64, x64, None if masks is None else
                                  {k: v.double() for k, v in masks.items()}, case.get("dp_sgd"))
            e_tc, e_32 = grad_errors(refs, {n: g64[n] for n in refs})[0], \
                grad_errors(grads, {n: g64[n] for n in refs})[0]
            still = [n for n in bad if not e_tc[n] <= max(TOL_TRAIN, 2 * e_32[n])]
            for n in still:
                r["notes"].append("%s: %.2e from PyTorch fp32; against PyTorch fp64 tcbench %.2e, "
                                  "PyTorch fp32 %.2e: FAILS" % (n, gerr[n], e_tc[n], e_32[n]))
            ok64 = [n for n in bad if n not in still]
            if ok64:
                w = max(ok64, key=lambda n: e_tc[n])
                r["notes"].append(
                    "%d gradients beyond %g of PyTorch fp32 (worst %s %.2e) are nearer PyTorch "
                    "fp64 than PyTorch fp32 is, or within %g of it (worst %s: tcbench %.2e, "
                    "PyTorch fp32 %.2e, against fp64)" % (
                        len(ok64), TOL_TRAIN, wname, gerr[wname], TOL_TRAIN, w, e_tc[w], e_32[w]))
            if loss_bad:
                lt, l3 = rel_err(tensors["train.loss"], l64), rel_err(loss, l64)
                rule = lt <= max(TOL_TRAIN, 2 * l3)
                r["notes"].append("loss: against PyTorch fp64 tcbench %.2e, PyTorch fp32 %.2e: %s"
                                  % (lt, l3, "passes by fp64" if rule else "FAILS"))
                loss_bad = not rule
            starred = bool(bad or r["loss"] > TOL_TRAIN) and not still and not loss_bad
            bad = still
        ok = ok and not bad and not loss_bad and not r.get("grad_missing")
    else:
        r["notes"].append("no training step in the file: %s" % meta.get("train", ""))
    r["status"] = ("PASS*" if starred else "PASS") if ok else "FAIL"
    return r, (model, xs, meta, tensors)


# ------------------------------------------------------------------ timing

def make_optimizer(params, opt):
    name, kw = opt, {}
    if isinstance(opt, dict):
        (name, kw), = opt.items()
        kw = kw or {}
    name = str(name)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=float(kw.get("lr", 0.01)),
                                 betas=(float(kw.get("beta1", 0.9)), float(kw.get("beta2", 0.999))),
                                 eps=float(kw.get("eps", 1e-8)),
                                 weight_decay=float(kw.get("weight_decay", 0.01)))
    if name == "sgd":
        return torch.optim.SGD(params, lr=float(kw.get("lr", 0.01)),
                               momentum=float(kw.get("momentum", 0.9)),
                               dampening=float(kw.get("dampening", 0)),
                               weight_decay=float(kw.get("weight_decay", 0)),
                               nesterov=bool(kw.get("nesterov", False)))
    raise Unsupported("optimizer %s" % name)


def stats_of(samples):
    s = sorted(samples)
    n = len(s)
    a = np.array(s)
    med = float(np.median(a))
    q1, q3 = float(np.percentile(a, 25)), float(np.percentile(a, 75))
    iqr = q3 - q1
    mean = float(a.mean())
    sd = float(a.std(ddof=1)) if n > 1 else 0.0
    mad = float(np.median(np.abs(a - med)))
    return {"median_s": med, "q1_s": q1, "q3_s": q3, "min_s": s[0], "max_s": s[-1],
            "mean_s": mean, "stddev_s": sd, "cv": sd / mean if mean else 0.0, "mad_s": mad,
            "outliers": int(((a < q1 - 1.5 * iqr) | (a > q3 + 1.5 * iqr)).sum()), "n": n}


def bootstrap_ratio(base, mode, seed=0, n=2000):
    rng = np.random.default_rng(seed)
    b, m = np.array(base), np.array(mode)
    k = len(b)
    idx = rng.integers(0, k, size=(n, k))
    r = np.median(b[idx], axis=1) / np.median(m[idx], axis=1)
    return float(np.percentile(r, 2.5)), float(np.percentile(r, 97.5))


def autocast(precision, amp_dtype="fp16"):
    """tcbench's `amp` on the CPU: float16 (or bfloat16, `--amp-dtype
    bf16`) autocast around the forward and the loss (docs/amp.md); `fp32`:
    nothing."""
    if precision == "amp":
        return torch.autocast(device_type="cpu",
                              dtype=torch.bfloat16 if amp_dtype == "bf16" else torch.float16)
    return contextlib.nullcontext()


# tcbench's measuring budget (engine/bench/config.h, timing.h), so that both
# sides are measured alike: timed rounds go on until each mode has 0.1 s of
# samples and the speedup's 95% interval is within 5% of it, with no extra
# round past 1 s of one mode's samples
TIME_MIN_S, TIME_MAX_S, TIME_CI_TARGET, TIME_MAX_ROUNDS = 0.1, 1.0, 0.05, 10000
WARMUP_ITERS, WARMUP_S, WARMUP_MAX_S, SAMPLE_MIN_S = 3, 0.2, 1.0, 1e-3
WINDOW_ITERS, WINDOW_S, WINDOW_MAX, SETTLE = 3, 0.02, 256, 0.03
# torch.compile's modes that mean something on a CPU (the others add CUDA graphs)
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")


def warm_up(f, fixed=None):
    """tcbench's warm-up rule (engine/bench/timing.h): steps in windows (at
    least 3 steps, ending at 20 ms or 256 steps) until at least 3 steps and
    0.2 s have run and a window's median step is no more than 3% below the
    window's before, or 1 s has run; `fixed` steps instead when given. The
    fastest step sets the steps per sample (at least 1 ms of them)."""
    start, fastest, prev, window = time.perf_counter(), float("inf"), None, []
    n, t_window = 0, start
    while True:
        t0 = time.perf_counter()
        f()
        now = time.perf_counter()
        fastest, n = min(fastest, now - t0), n + 1
        if fixed:
            if n >= fixed:
                break
            continue
        window.append(now - t0)
        minimum = n >= WARMUP_ITERS and now - start >= WARMUP_S
        full = now - t_window >= WINDOW_S or len(window) == WINDOW_MAX
        if len(window) >= WINDOW_ITERS and full:
            med = statistics.median(window)
            if minimum and prev is not None and med >= (1 - SETTLE) * prev:
                break
            prev, window, t_window = med, [], now
        if minimum and now - start >= WARMUP_MAX_S:
            break
    return max(1, int(math.ceil(SAMPLE_MIN_S / max(fastest, 1e-9))))


def time_case(case, model, xs, args, workload, tensors, precision="fp32"):
    """Interleaved rounds of PyTorch eager and torch.compile for one
    workload and precision: (samples per mode, compile latency s, error
    message per mode). No GradScaler under amp: tcbench's `--grad-scaler` is
    off by default, as in PyTorch's harness."""
    # Dynamo from scratch: every YamlModel shares one forward (and every
    # timing one step function), so without a reset each case, precision
    # and workload is a recompile of the same code, and past Dynamo's
    # recompile limit (8) torch.compile silently runs eager
    torch._dynamo.reset()
    eager = model
    fns, errors, compile_s = {}, {}, None
    if workload == "infer":
        eager.eval()
        fwds = {"torch-eager": eager}
        if not args.no_compile:
            fwds["torch-compile"] = torch.compile(eager, mode=args.compile_mode)
        for mode, fwd in fwds.items():
            def step(fwd=fwd):
                with torch.no_grad(), autocast(precision, args.amp_dtype):
                    return fwd(*xs)
            fns[mode] = step
    else:
        models = {"torch-eager": eager}
        if not args.no_compile:
            models["torch-compile"] = build_loaded(case, tensors, args)[0]
        for mode, m in models.items():
            m.train()
            opt = make_optimizer(m.parameters(), case["optimizer"])

            def step(m=m, opt=opt):
                opt.zero_grad(set_to_none=True)
                with autocast(precision, args.amp_dtype):
                    loss = m.forward_loss(*xs)
                loss.backward()
                opt.step()
                return loss
            if mode == "torch-compile":
                step = torch.compile(step, mode=args.compile_mode)
            fns[mode] = step
    # first calls: compile latency, then warm-up
    for mode, f in list(fns.items()):
        t0 = time.perf_counter()
        try:
            f()
        except Exception as e:  # a compile or run failure ends this mode only
            errors[mode] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            del fns[mode]
            continue
        if mode == "torch-compile":
            compile_s = time.perf_counter() - t0
    iters = {mode: warm_up(f, args.warmup) for mode, f in fns.items()}
    samples = {m: [] for m in fns}
    spent = {m: 0.0 for m in fns}  # each mode's timed seconds
    modes = list(fns)
    t_start = time.perf_counter()
    r, look = 0, max(1, args.rounds)
    while True:
        if r >= look:  # tcbench's rule for more rounds (engine/bench/timing.h)
            if r >= TIME_MAX_ROUNDS or max(spent.values()) >= TIME_MAX_S:
                break
            if min(spent.values()) >= TIME_MIN_S:
                if len(modes) < 2:
                    break
                lo, hi = bootstrap_ratio(samples[modes[0]], samples[modes[1]], n=500)
                mid = statistics.median(samples[modes[0]]) / statistics.median(samples[modes[1]])
                if hi - lo <= TIME_CI_TARGET * mid:
                    break
                look = r + max(1, r // 2)  # look again once the rounds have grown by half
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for mode in order:
            f, n = fns[mode], iters[mode]
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            dt = time.perf_counter() - t0
            samples[mode].append(dt / n)
            spent[mode] += dt
        r += 1
    timed = time.perf_counter() - t_start
    return samples, iters, compile_s, errors, timed


def host_block(threads):
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {"hostname": socket.gethostname(), "os": "%s %s %s" % (platform.system(),
                                                                 platform.release(),
                                                                 platform.machine()),
            "cpu_model": cpu, "cores": os.cpu_count(), "threads_used": threads,
            "loadavg_start": load,
            "torch": {"version": torch.__version__, "python": platform.python_version(),
                      "numpy": np.__version__, "mkldnn": torch.backends.mkldnn.is_available(),
                      "config": torch.__config__.parallel_info().splitlines()[:3]},
            "gpus": [], "calibration": None}


def written(v):
    """A suite's override as tcbench's results record it: a number where
    the suite wrote a number, else the expression's text."""
    t = parse_expr(str(v)) if not isinstance(v, (int, float)) else ("num", v)
    return t[1] if t is not None and t[0] == "num" else str(v)


def entries_for(case, model, workload, samples, iters, compile_s, errors, timed, chk,
                precision="fp32"):
    out = []
    pc = sum(p.numel() for p in model.parameters())
    base = samples.get("torch-eager")
    tol = TOL_INFER if workload == "infer" else TOL_TRAIN
    if precision != "fp32":  # the file holds tcbench's fp32 step only
        chk, why = None, "%s: tcbench's file holds its fp32 outputs and step only" % precision
    else:
        why = "" if chk is not None else "no tcbench weights"
    for mode in ("torch-eager", "torch-compile"):
        if mode not in samples and mode not in errors:
            continue
        s = samples.get(mode, [])
        st = stats_of(s) if s else None
        e = {"suite": case["suite"], "name": case["name"], "model": model.name_,
             "family": model.family, "device": "cpu", "mode": mode, "precision": precision,
             "workload": workload, "batch": case["batch"], "suite_batch": case["batch"],
             "study": case["study"], "params": {k: written(v) for k, v in case["params"].items()},
             "status": "ok" if mode == "torch-eager" else "pass", "message": "",
             "samples_s": s, "clock": "host", "host_samples_s": None, "stats": st,
             "iterations_per_sample": iters.get(mode, 1), "param_count": pc,
             "flops": None, "peak_bytes": None, "kernels": None, "cast_kernels": 0,
             "accuracy": {"checked": mode == "torch-eager" and chk is not None,
                          "reason": why,
                          "rel_l2": None, "max_abs": None, "rmse": None, "cosine": None,
                          "outputs": [], "tolerance": tol, "cosine_fallback": False,
                          "vs_tcbench_eager": None},
             "compile": None, "arena_bytes": None, "speedup": None, "compression_ratio": None,
             "min_bytes": None, "roofline": None, "wall_s": timed}
        if chk is not None and mode == "torch-eager":
            if workload == "infer":
                e["accuracy"]["vs_tcbench_eager"] = {"rel_l2": chk.get("infer")}
                if not chk.get("infer", 1) <= TOL_INFER:
                    e["status"] = "fail_accuracy"
            else:
                e["accuracy"]["vs_tcbench_eager"] = {"loss_rel": chk.get("loss"),
                                                     "grad_rel": chk.get("grad"),
                                                     "grad_name": chk.get("grad_name")}
        if mode in errors:
            e["status"] = "fail_to_run"
            e["message"] = errors[mode]
        if mode == "torch-compile" and compile_s is not None:
            e["compile"] = {"cold_s": compile_s, "warm_s": None, "cache_hit": False,
                            "what": "first call of the torch.compile'd function (Dynamo, "
                                    "AOTAutograd, Inductor, the C++ compiler), one step included"}
        if mode == "torch-compile" and s and base:
            lo, hi = bootstrap_ratio(base, s)
            e["speedup"] = {"median": stats_of(base)["median_s"] / st["median_s"],
                            "ci95_lo": lo, "ci95_hi": hi}
        if s:
            med = st["median_s"]
            e["stability"] = {"noise": 1.4826 * st["mad_s"] / med if med else 0.0,
                              "ci_rel_width": None, "rounds": len(s), "timed_s": timed,
                              "processes": 1, "process_medians_s": [med], "process_spread": None,
                              "unstable": False, "reasons": []}
            if e["speedup"]:
                sp = e["speedup"]
                e["stability"]["ci_rel_width"] = (sp["ci95_hi"] - sp["ci95_lo"]) / sp["median"]
        else:
            e["stability"] = None
        out.append(e)
    return out


# ------------------------------------------------------------------ main

def fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    return "%.2e" % x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", help="a suite file (suites/smoke.yaml)")
    ap.add_argument("weights", help="the directory `tcbench weights SUITE -o DIR` wrote")
    ap.add_argument("--only", action="append", default=[], help="cases (repeatable, or a comma list)")
    ap.add_argument("--size", help="the suite's size NAME (as given to `tcbench weights --size`)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--attention", choices=("math", "sdpa"), default="math",
                    help="attention as HF's eager math (default, as tcbench's default) or "
                         "F.scaled_dot_product_attention")
    ap.add_argument("--dropout-streams", action="append", default=[], metavar="CASE=S1,S2,...",
                    help="tcbench's dropout mask streams of CASE's sites in build order (when the "
                         "file's metadata has no dropout_streams)")
    ap.add_argument("--case-tolerance", action="store_true",
                    help="check inference with the suite's tolerance instead of 1e-4")
    ap.add_argument("--no-fp64", action="store_true",
                    help="no fp64 PyTorch reference for items beyond the training tolerance")
    ap.add_argument("--time", action="store_true", help="time PyTorch eager and torch.compile")
    ap.add_argument("--workload", default="infer,train", help="with --time: infer, train or both")
    ap.add_argument("--precision", default="fp32",
                    help="with --time: fp32, amp (float16 autocast, as tcbench's) or both")
    ap.add_argument("--amp-dtype", default="fp16", choices=("fp16", "bf16"),
                    help="with --time: amp's low dtype, as tcbench's --amp-dtype (default fp16)")
    ap.add_argument("--rounds", type=int, default=10,
                    help="with --time: interleaved rounds at least (more while the speedup's "
                         "95%% interval is wider than 5%%, as tcbench)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="with --time: exactly N warm-up steps per mode (default: tcbench's "
                         "rule, until the step time settles)")
    ap.add_argument("--no-compile", action="store_true", help="with --time: PyTorch eager only")
    ap.add_argument("--compile-mode", default="default", choices=COMPILE_MODES,
                    help="with --time: torch.compile's mode (default: Inductor's default; "
                         "max-autotune-no-cudagraphs: Inductor also benchmarks GEMM and "
                         "convolution templates at compile time)")
    ap.add_argument("--warm-cache", action="store_true",
                    help="with --time: keep Inductor's own cache (default: a fresh empty one, so "
                         "that the first call's time is a cold compile)")
    ap.add_argument("-o", "--output", help="with --time: the results JSON to write")
    ap.add_argument("--strict", action="store_true",
                    help="a SKIP fails too (exit status 1): every case must be PASS or PASS*")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each case's notes")
    args = ap.parse_args(argv)
    precisions = [p for p in args.precision.split(",") if p]
    if not precisions or any(p not in ("fp32", "amp") for p in precisions):
        ap.error("--precision: fp32, amp or fp32,amp")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.time and not args.no_compile:
        # Inductor compiles in this process: no pool of compile workers
        # left running beside the timed rounds
        import torch._inductor.config as icfg
        icfg.compile_threads = 1
        if not args.warm_cache:  # compile latency from an empty cache, as tcbench's cold_s
            import shutil
            import tempfile
            cache = tempfile.mkdtemp(prefix="torch_side_by_side.")
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
            os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
            import atexit
            atexit.register(shutil.rmtree, cache, True)
    try:
        suite, cases = load_suite(args.suite, args.size)
    except (OSError, yaml.YAMLError, BuildError, KeyError) as e:
        print("%s: %s" % (args.suite, e), file=sys.stderr)
        return 2
    only = [x for o in args.only for x in o.split(",") if x]
    if only:
        names = {c["name"] for c in cases}
        bad = [o for o in only if o not in names]
        if bad:
            print("no case %s in %s" % (", ".join(bad), args.suite), file=sys.stderr)
            return 2
        cases = [c for c in cases if c["name"] in only]
    print("%-16s %10s %10s %10s  %-44s %s" % ("case", "infer", "loss", "grad", "worst gradient",
                                              "status"))
    results, entries, rc = [], [], 0
    t_run = time.perf_counter()
    host = host_block(args.threads)
    for case in cases:
        try:
            r, built = check_case(case, args.weights, args)
        except Exception as e:  # one case's failure is that case's ERROR
            import traceback
            where = traceback.extract_tb(e.__traceback__)[-1]
            r, built = {"case": case["name"], "status": "ERROR", "notes": ["%s: %s (%s:%d)" % (
                type(e).__name__, e, os.path.basename(where.filename), where.lineno)]}, None
        results.append(r)
        print("%-16s %10s %10s %10s  %-44s %s" % (r["case"], fmt(r.get("infer")), fmt(r.get("loss")),
                                                  fmt(r.get("grad")), r.get("grad_name", ""),
                                                  r["status"]), flush=True)
        if args.verbose or r["status"] not in ("PASS", "SKIP"):
            for n in r["notes"]:
                print("    %s" % n)
        if r["status"] not in ("PASS", "PASS*") + (() if args.strict else ("SKIP",)):
            rc = 1
        if args.time and built is not None:
            model, xs, meta, tensors = built
            state0 = snapshot(model)
            for prec, wl in [(p, w) for p in precisions for w in args.workload.split(",") if w]:
                if wl == "train" and model.loss_spec is None:
                    continue
                restore(model, state0)  # each timing starts from the file's values
                samples, iters, cs, errs, timed = time_case(case, model, xs, args, wl, tensors,
                                                            prec)
                es = entries_for(case, model, wl, samples, iters, cs, errs, timed, r, prec)
                entries.extend(es)
                for e in es:
                    st = e["stats"]
                    print("    %-4s %-5s %-13s %s%s%s" % (
                        prec, wl, e["mode"], "median %.3f ms" % (st["median_s"] * 1e3) if st else
                        e["status"] + " " + e["message"],
                        "  compile %.1f s" % e["compile"]["cold_s"] if e["compile"] else "",
                        "  speedup %.2fx" % e["speedup"]["median"] if e["speedup"] else ""),
                        flush=True)
    if args.time and args.output:
        doc = {"schema_version": 1,
               "tool": {"name": "torch_side_by_side", "version": VERSION, "git_commit": "unknown"},
               "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "command_line": [sys.argv[0]] + (argv if argv is not None else sys.argv[1:]),
               "host": host,
               "config": {"suites": [args.suite], "size": args.size, "seed": 0, "batch_size": 0,
                          "repeat": args.rounds, "warmup": args.warmup, "min_time_s": TIME_MIN_S,
                          "max_time_s": TIME_MAX_S, "processes": 1,
                          "pin": False, "order": "rotate", "threads": args.threads,
                          "modes": ["torch-eager"] + ([] if args.no_compile else ["torch-compile"]),
                          "precisions": precisions, "workloads": args.workload.split(","),
                          "amp_dtype": args.amp_dtype, "grad_scaler": False,
                          "devices": ["cpu"], "device": "cpu", "attention": args.attention,
                          "check_accuracy": True, "only": only,
                          "torch_compile_mode": args.compile_mode},
               "cases": entries, "wall_s": time.perf_counter() - t_run}
        d = os.path.dirname(os.path.abspath(args.output))
        os.makedirs(d, exist_ok=True)
        tmp = "%s.tmp.%d" % (args.output, os.getpid())
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        os.replace(tmp, args.output)
        print("results: %s" % args.output)
    return rc


if __name__ == "__main__":
    sys.exit(main())
