#!/usr/bin/env python3
"""PyTorch's own eager vs torch.compile greedy decode speed, beside tcbench's.

    venv-torch/bin/python scripts/torch_generate.py --threads 2
    venv-torch/bin/python scripts/torch_generate.py --mode eager,compiled \
        [--threads 2] [--repeats 5] [--prompt-len 128] [--new-tokens 128] \
        [--eager-prefill] [--json results/torch_generate.json]

What it measures: greedy text generation of a small LLaMA on the CPU, batch
1, a prompt of --prompt-len random token ids, then --new-tokens tokens (the
prefill's argmax and new_tokens - 1 decode steps), the argmax taken outside
the model each step (as Hugging Face's generate does), in three modes:

- eager: Hugging Face-style dynamic cache: each decode step concatenates
  (torch.cat) the past keys/values with the new ones; attention unfused
  (q k^T, scale, causal mask in the prefill only, softmax, times v), GQA by
  repeat_kv.
- sdpa: the same, with the attention proper as
  torch.nn.functional.scaled_dot_product_attention (after repeat_kv).
- compiled: gpt-fast style: a static KV cache of prompt_len + new_tokens - 1
  rows a layer (the last token is never fed back; tcbench's size), allocated
  once, written in place with index_copy_ at the input positions; SDPA over
  the whole static cache with a boolean mask of the valid positions; the
  decode step compiled once with torch.compile(fullgraph=True,
  dynamic=False), the position passed as a tensor so that it does not
  recompile each step; the prefill compiled separately the same way (one
  shape, one compile), or run eagerly through the same static-cache code
  with --eager-prefill.

Each decode step is timed with time.perf_counter (the step's forward, the
argmax and the next input); the time to first token is the prefill and its
argmax. After one warm-up generation per mode (which also compiles; the
compile is reported on its own), --repeats generations per mode run
interleaved round-robin. Per mode it prints the median decode ms/token (over
every step of every timed generation), tokens/s, the median time to first
token and eager's time over the mode's (the speedup over eager), and checks
that every mode's greedy tokens equal eager's.

The model mirrors models/llama.yaml at the generate suite's `--size cpu`
(suites/generate.yaml): vocab 8192, 256 positions, d_model 256, 4 layers, 8
query heads sharing 2 key/value heads (head dim 32), RMSNorm (eps 1e-6, a
weight), rotary embedding over the whole head (theta 10000, rotate_half
pairs (i, i + 16)), separate q/k/v/o projections, SwiGLU feed-forward
(silu(gate(h)) * up(h), then down) of width 688, no biases, an untied
lm_head; the prefill computes the logits of every prompt position, as
tcbench's prefill does. Random weights (torch.manual_seed(0)), fp32, eval
mode, torch.inference_mode(). The weights are not tcbench's, so the tokens
are not comparable with tcbench's, only the timings.

Optional: needs only torch (CPU is enough; the compiled mode needs a C++
compiler for Inductor). Nothing in tcbench's build, tests or CI runs it.
"""
import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# models/llama.yaml at suites/generate.yaml's cpu size
VOCAB = 8192
MAX_POS = 256
D_MODEL = 256
LAYERS = 4
HEADS = 8
KV_HEADS = 2
FFN = 688
RMS_EPS = 1e-6
ROPE_THETA = 10000.0

MODES = ("eager", "compiled", "sdpa")


# ------------------------------------------------------------------ model

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=RMS_EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x, cos, sin):
    # x (B, H, T, hd); cos, sin (T, hd)
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, n_rep):
    # (B, KVH, S, hd) -> (B, KVH * n_rep, S, hd): query head h uses kv head h // n_rep
    if n_rep == 1:
        return x
    b, kvh, s, hd = x.shape
    return x[:, :, None, :, :].expand(b, kvh, n_rep, s, hd).reshape(b, kvh * n_rep, s, hd)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.hd = D_MODEL // HEADS
        self.n_rep = HEADS // KV_HEADS
        self.scale = 1.0 / math.sqrt(self.hd)
        self.q_proj = nn.Linear(D_MODEL, HEADS * self.hd, bias=False)
        self.k_proj = nn.Linear(D_MODEL, KV_HEADS * self.hd, bias=False)
        self.v_proj = nn.Linear(D_MODEL, KV_HEADS * self.hd, bias=False)
        self.o_proj = nn.Linear(HEADS * self.hd, D_MODEL, bias=False)

    def qkv(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, HEADS, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, KV_HEADS, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, KV_HEADS, self.hd).transpose(1, 2)
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v

    def out(self, o):
        b, _, t, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(b, t, HEADS * self.hd))

    def forward_dynamic(self, x, cos, sin, past, sdpa):
        """Hugging Face-style: returns (output, (k, v)) with the past concatenated."""
        q, k, v = self.qkv(x, cos, sin)
        if past is not None:
            k = torch.cat((past[0], k), dim=2)
            v = torch.cat((past[1], v), dim=2)
        present = (k, v)
        kr, vr = repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep)
        t, s = q.shape[2], kr.shape[2]
        if sdpa:
            # with no past, T == S and is_causal is the usual mask; a decode
            # step (T == 1) sees every past position and needs none
            o = F.scaled_dot_product_attention(q, kr, vr, is_causal=(t > 1 and past is None))
        else:
            scores = torch.matmul(q, kr.transpose(2, 3)) * self.scale
            if t > 1:
                mask = torch.full((t, s), float("-inf")).triu(s - t + 1)
                scores = scores + mask
            p = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            o = torch.matmul(p, vr)
        return self.out(o), present

    def forward_static(self, x, cos, sin, k_cache, v_cache, input_pos, mask):
        """gpt-fast style: writes k, v into the static caches at input_pos in place."""
        q, k, v = self.qkv(x, cos, sin)
        k_cache.index_copy_(2, input_pos, k)
        v_cache.index_copy_(2, input_pos, v)
        kr, vr = repeat_kv(k_cache, self.n_rep), repeat_kv(v_cache, self.n_rep)
        o = F.scaled_dot_product_attention(q, kr, vr, attn_mask=mask)
        return self.out(o)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_norm = RMSNorm(D_MODEL)
        self.attn = Attention()
        self.mlp_norm = RMSNorm(D_MODEL)
        self.gate = nn.Linear(D_MODEL, FFN, bias=False)
        self.up = nn.Linear(D_MODEL, FFN, bias=False)
        self.down = nn.Linear(FFN, D_MODEL, bias=False)

    def mlp(self, x):
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        hd = D_MODEL // HEADS
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(D_MODEL)
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)
        inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        ang = torch.outer(torch.arange(MAX_POS, dtype=torch.float64), inv_freq)
        ang = torch.cat((ang, ang), dim=-1)  # rotate_half: (i, i + hd/2) share a frequency
        self.register_buffer("rope_cos", ang.cos().float(), persistent=False)
        self.register_buffer("rope_sin", ang.sin().float(), persistent=False)
        self.k_caches = []
        self.v_caches = []
        self.causal = None

    # --- eager / sdpa: Hugging Face-style dynamic cache
    def forward_dynamic(self, tokens, past, sdpa):
        t = tokens.shape[1]
        start = 0 if past is None else past[0][0].shape[2]
        cos, sin = self.rope_cos[start:start + t], self.rope_sin[start:start + t]
        x = self.embed(tokens)
        presents = []
        for i, layer in enumerate(self.layers):
            a, pres = layer.attn.forward_dynamic(layer.attn_norm(x), cos, sin,
                                                 None if past is None else past[i], sdpa)
            x = layer.mlp(x + a)
            presents.append(pres)
        return self.lm_head(self.norm(x)), presents

    # --- compiled: gpt-fast-style static cache
    def setup_static(self, batch, max_len):
        hd = D_MODEL // HEADS
        self.k_caches = [torch.zeros(batch, KV_HEADS, max_len, hd) for _ in range(LAYERS)]
        self.v_caches = [torch.zeros(batch, KV_HEADS, max_len, hd) for _ in range(LAYERS)]
        self.causal = torch.ones(max_len, max_len, dtype=torch.bool).tril()

    def forward_static(self, tokens, input_pos):
        # tokens (B, T); input_pos (T,) int64: the positions they take
        cos, sin = self.rope_cos[input_pos], self.rope_sin[input_pos]
        mask = self.causal[input_pos][None, None]  # (1, 1, T, max_len): valid and causal
        x = self.embed(tokens)
        for i, layer in enumerate(self.layers):
            a = layer.attn.forward_static(layer.attn_norm(x), cos, sin,
                                          self.k_caches[i], self.v_caches[i], input_pos, mask)
            x = layer.mlp(x + a)
        return self.lm_head(self.norm(x))


# ------------------------------------------------------------------ generation

def pick(logits):
    """The greedy next token of each row from its last position's logits: (B, 1)."""
    return logits[:, -1].argmax(dim=-1, keepdim=True)


def generate_dynamic(model, prompt, new_tokens, sdpa):
    t0 = time.perf_counter()
    logits, past = model.forward_dynamic(prompt, None, sdpa)
    tok = pick(logits)
    ttft = time.perf_counter() - t0
    out = [int(tok[0, 0])]
    steps = []
    for _ in range(new_tokens - 1):
        t0 = time.perf_counter()
        logits, past = model.forward_dynamic(tok, past, sdpa)
        tok = pick(logits)
        steps.append(time.perf_counter() - t0)
        out.append(int(tok[0, 0]))
    return out, ttft, steps


class Compiled:
    """The gpt-fast-style generator: static cache, compiled prefill and decode step."""

    def __init__(self, model, batch, prompt_len, new_tokens, compile_prefill):
        self.model = model
        self.prompt_len = prompt_len
        self.new_tokens = new_tokens
        model.setup_static(batch, prompt_len + new_tokens - 1)
        self.prefill_pos = torch.arange(prompt_len)
        self.decode = torch.compile(model.forward_static, fullgraph=True, dynamic=False)
        self.prefill = (torch.compile(model.forward_static, fullgraph=True, dynamic=False)
                        if compile_prefill else model.forward_static)
        self.first_call_s = {}  # the first call of each: compile plus one run

    def _timed_first(self, name, fn, *args):
        if name in self.first_call_s:
            return fn(*args)
        t0 = time.perf_counter()
        r = fn(*args)
        self.first_call_s[name] = time.perf_counter() - t0
        return r

    def generate(self, prompt, graphs_per_step=None):
        # The static cache is not cleared between generations: the mask hides
        # every row at or past the position being written.
        t0 = time.perf_counter()
        logits = self._timed_first("prefill", self.prefill, prompt, self.prefill_pos)
        tok = pick(logits)
        ttft = time.perf_counter() - t0
        out = [int(tok[0, 0])]
        steps = []
        for j in range(self.new_tokens - 1):
            pos = torch.tensor([self.prompt_len + j], dtype=torch.int64)
            t0 = time.perf_counter()
            logits = self._timed_first("decode", self.decode, tok, pos)
            tok = pick(logits)
            steps.append(time.perf_counter() - t0)
            out.append(int(tok[0, 0]))
            if graphs_per_step is not None:
                graphs_per_step.append(dynamo_graphs())
        return out, ttft, steps


def dynamo_graphs():
    """How many graphs Dynamo has compiled so far (each recompile adds one)."""
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


# ------------------------------------------------------------------ main

def compare(ref, got):
    bad = [i for i, (a, b) in enumerate(zip(ref, got)) if a != b]
    return len(bad), (bad[0] if bad else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", default=",".join(MODES),
                    help="comma-separated subset of eager,compiled,sdpa (default: all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--eager-prefill", action="store_true",
                    help="compiled mode: run the prefill eagerly (static cache) instead of compiling it")
    ap.add_argument("--json", metavar="PATH", help="write the figures to PATH")
    a = ap.parse_args()

    modes = [m.strip() for m in a.mode.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m!r} (known: {', '.join(MODES)})")
    modes = [m for m in MODES if m in modes]  # eager first: it is the reference
    if a.prompt_len < 1 or a.new_tokens < 2 or a.repeats < 1 or a.threads < 1:
        ap.error("--prompt-len, --repeats, --threads must be >= 1 and --new-tokens >= 2")
    if a.prompt_len + a.new_tokens - 1 > MAX_POS:
        ap.error(f"prompt_len + new_tokens - 1 = {a.prompt_len + a.new_tokens - 1} "
                 f"exceeds the model's {MAX_POS} positions")

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Llama().eval()
    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, VOCAB, (1, a.prompt_len), generator=gen)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__}, {a.threads} threads, LLaMA {nparams / 1e6:.2f}M params "
          f"({LAYERS} layers, d_model {D_MODEL}, heads {HEADS}/{KV_HEADS} kv, ffn {FFN}, "
          f"vocab {VOCAB}), fp32, batch 1, prompt {a.prompt_len}, new tokens {a.new_tokens}",
          flush=True)

    times = {m: {"ttft": [], "steps": [], "gen_median": []} for m in modes}
    tokens = {}
    compiled = None
    recompile = {}

    with torch.inference_mode():
        # the reference tokens: eager's, computed even when eager is not timed
        ref, _, _ = generate_dynamic(model, prompt, a.new_tokens, sdpa=False)

        def run(m, graphs_per_step=None):
            if m == "compiled":
                return compiled.generate(prompt, graphs_per_step)
            return generate_dynamic(model, prompt, a.new_tokens, sdpa=(m == "sdpa"))

        # warm-up (and compile)
        warm = {}
        for m in modes:
            if m == "compiled":
                compiled = Compiled(model, 1, a.prompt_len, a.new_tokens, not a.eager_prefill)
                g0 = dynamo_graphs()
                per_step = []
                t0 = time.perf_counter()
                out, _, _ = run(m, per_step)
                warm[m] = time.perf_counter() - t0
                # graphs compiled by the decode steps after the first one
                recompile["warmup_graphs_total"] = dynamo_graphs() - g0
                recompile["warmup_graphs_after_first_step"] = per_step[-1] - per_step[0]
                recompile["g_before_timed"] = dynamo_graphs()
            else:
                t0 = time.perf_counter()
                out, _, _ = run(m)
                warm[m] = time.perf_counter() - t0
            tokens[m] = [out]
            print(f"warm-up {m}: {warm[m]:.2f} s", flush=True)
        if compiled is not None:
            fc = compiled.first_call_s
            print("compile (first call, compile + one run): decode step "
                  f"{fc['decode']:.2f} s, prefill {fc['prefill']:.2f} s"
                  + (" (eager, not compiled)" if a.eager_prefill else ""), flush=True)

        # timed: round-robin over the modes
        for r in range(a.repeats):
            for m in modes:
                out, ttft, steps = run(m)
                tokens[m].append(out)
                times[m]["ttft"].append(ttft)
                times[m]["steps"].extend(steps)
                times[m]["gen_median"].append(statistics.median(steps))
        if compiled is not None:
            recompile["timed_graphs"] = dynamo_graphs() - recompile.pop("g_before_timed")

    # ---- report
    res = {}
    for m in modes:
        dec = statistics.median(times[m]["steps"])
        res[m] = {
            "decode_ms": dec * 1e3,
            "tokens_per_s": 1.0 / dec,
            "ttft_ms": statistics.median(times[m]["ttft"]) * 1e3,
            "gen_median_ms": [x * 1e3 for x in times[m]["gen_median"]],
            "warmup_s": warm[m],
        }
        mism = [compare(ref, t) for t in tokens[m]]
        res[m]["mismatches"] = max(n for n, _ in mism)
        firsts = [f for _, f in mism if f is not None]
        res[m]["first_mismatch_step"] = min(firsts) if firsts else None
        res[m]["tokens_stable"] = all(t == tokens[m][0] for t in tokens[m])
    if "eager" in res:
        for m in modes:
            res[m]["speedup_vs_eager_decode"] = res["eager"]["decode_ms"] / res[m]["decode_ms"]
            res[m]["speedup_vs_eager_ttft"] = res["eager"]["ttft_ms"] / res[m]["ttft_ms"]

    print()
    hdr = (f"{'mode':<9} {'decode ms/tok':>13} {'tok/s':>8} {'ttft ms':>8} "
           f"{'eager/mode':>10} {'ttft e/m':>8} {'gen medians ms (min-max)':>25} {'mismatch':>9}")
    print(hdr)
    print("-" * len(hdr))
    for m in modes:
        r = res[m]
        g = r["gen_median_ms"]
        sp = f"{r['speedup_vs_eager_decode']:.2f}x" if "eager" in res else "-"
        st = f"{r['speedup_vs_eager_ttft']:.2f}x" if "eager" in res else "-"
        mm = str(r["mismatches"]) + (f"@{r['first_mismatch_step']}" if r["mismatches"] else "")
        print(f"{m:<9} {r['decode_ms']:>13.3f} {r['tokens_per_s']:>8.1f} {r['ttft_ms']:>8.2f} "
              f"{sp:>10} {st:>8} {f'{min(g):.3f}-{max(g):.3f}':>25} {mm:>9}")
    print(f"\nmismatch: tokens differing from eager's greedy tokens (of {a.new_tokens}), "
          "worst generation, @ the first mismatching step (0 = the prefill's token)")
    if compiled is not None:
        fc = compiled.first_call_s
        recompile["decode_compile_s"] = fc["decode"]
        recompile["prefill_first_call_s"] = fc["prefill"]
        recompile["prefill_compiled"] = not a.eager_prefill
        ok = recompile["warmup_graphs_after_first_step"] == 0 and recompile["timed_graphs"] == 0
        print(f"compiled: {recompile['warmup_graphs_total']} Dynamo graph(s) compiled in warm-up "
              f"(prefill {'compiled' if not a.eager_prefill else 'eager'}), "
              f"{recompile['warmup_graphs_after_first_step']} after the first decode step, "
              f"{recompile['timed_graphs']} during the timed runs: "
              + ("no recompiles" if ok else "RECOMPILED"))
        recompile["recompiled"] = not ok
        for m in modes:
            if m == "compiled":
                res[m]["compile"] = recompile

    if a.json:
        doc = {
            "tool": "scripts/torch_generate.py",
            "torch": torch.__version__,
            "python": platform.python_version(),
            "host": platform.node(),
            "machine": platform.machine(),
            "threads": a.threads,
            "repeats": a.repeats,
            "batch": 1,
            "prompt_len": a.prompt_len,
            "new_tokens": a.new_tokens,
            "model": {"vocab": VOCAB, "seq": MAX_POS, "d_model": D_MODEL, "layers": LAYERS,
                      "heads": HEADS, "kv_heads": KV_HEADS, "ffn": FFN, "rms_eps": RMS_EPS,
                      "rope_theta": ROPE_THETA, "params": nparams},
            "modes": res,
        }
        d = os.path.dirname(a.json)
        if d:
            os.makedirs(d, exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
