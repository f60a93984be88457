"""Small GPT-2 and LLaMA-style models and static-KV-cache decode-step wrappers for ONNX export
(a probe for issue 39; export.py says what it found).

Interface of every wrapper (one graph for prefill and decode):
  inputs : input_ids      int64 [batch, new_tokens]
           cache_position int64 [new_tokens]     (absolute positions of the new tokens, HF convention)
           attention_mask int64 [batch, MAX_LEN] (1 = slot holds a real token, incl. the new ones)
           past_key_{i}, past_value_{i}  float32 [batch, kv_heads, MAX_LEN, head_dim]
  outputs: logits [batch, new_tokens, vocab], present_key_{i}, present_value_{i} (same shape as past)
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformers

MAX_LEN = int(__import__("os").environ.get("DECODE_MAX_LEN", "64"))  # cache positions
torch.manual_seed(0)


def make_gpt2():
    cfg = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=MAX_LEN,
                                  initializer_range=0.2, attn_implementation="eager")
    torch.manual_seed(0)
    m = transformers.GPT2LMHeadModel(cfg).eval()
    return m


def make_llama():
    cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=MAX_LEN,
                                   initializer_range=0.2, attn_implementation="eager", tie_word_embeddings=False)
    torch.manual_seed(0)
    m = transformers.LlamaForCausalLM(cfg).eval()
    return m


# ---------------------------------------------------------------- cache update variants
def update_cache(cache, new, pos, how):
    """cache [B,H,L,D], new [B,H,T,D], pos [T] -> updated cache (functional; exported as one op chain)."""
    if how == "index_copy":            # what HF StaticLayer does (in-place there)
        return cache.index_copy(2, pos, new)
    if how == "index_put_none":        # cache[:, :, pos] = new
        out = cache.clone()
        out[:, :, pos] = new
        return out
    if how == "index_put_full":        # all leading axes advanced -> ScatterND indices [B,H,T,3]
        B, H, T, _ = new.shape
        b = torch.arange(B).view(B, 1, 1).expand(B, H, T)
        h = torch.arange(H).view(1, H, 1).expand(B, H, T)
        p = pos.view(1, 1, T).expand(B, H, T)
        return torch.index_put(cache, (b, h, p), new)
    if how == "scatter":               # ScatterElements(axis=2)
        idx = pos.view(1, 1, -1, 1).expand_as(new)
        return torch.scatter(cache, 2, idx, new)
    raise ValueError(how)


def causal_mask(attention_mask, pos, dtype=torch.float32):
    """[B,1,T,L] additive mask: key j visible to query i iff attention_mask[b,j] and j <= pos[i]."""
    L = attention_mask.shape[-1]
    j = torch.arange(L, device=pos.device)
    allowed = (j.view(1, 1, 1, L) <= pos.view(1, 1, -1, 1)) & (attention_mask.view(attention_mask.shape[0], 1, 1, L) != 0)
    zero = torch.zeros((), dtype=dtype)
    neg = torch.full((), torch.finfo(dtype).min, dtype=dtype)
    return torch.where(allowed, zero, neg)


# ---------------------------------------------------------------- own wrappers
class Gpt2Step(nn.Module):
    def __init__(self, hf, how="index_copy"):
        super().__init__()
        self.t = hf.transformer
        self.lm_head = hf.lm_head
        self.nh = hf.config.n_head
        self.how = how

    def forward(self, input_ids, cache_position, attention_mask, *past):
        B, T = input_ids.shape
        h = self.t.wte(input_ids) + self.t.wpe(cache_position).unsqueeze(0)
        mask = causal_mask(attention_mask, cache_position)
        presents = []
        for i, blk in enumerate(self.t.h):
            x = blk.ln_1(h)
            q, k, v = blk.attn.c_attn(x).split(x.shape[-1], dim=2)
            D = x.shape[-1] // self.nh
            q, k, v = (t.view(B, T, self.nh, D).transpose(1, 2) for t in (q, k, v))
            kc = update_cache(past[2 * i], k, cache_position, self.how)
            vc = update_cache(past[2 * i + 1], v, cache_position, self.how)
            presents += [kc, vc]
            s = torch.matmul(q, kc.transpose(-1, -2)) / math.sqrt(D) + mask
            a = torch.matmul(torch.softmax(s, dim=-1), vc)
            a = a.transpose(1, 2).reshape(B, T, -1)
            h = h + blk.attn.c_proj(a)
            h = h + blk.mlp(blk.ln_2(h))
        logits = self.lm_head(self.t.ln_f(h))
        return (logits, *presents)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaStep(nn.Module):
    def __init__(self, hf, how="index_copy"):
        super().__init__()
        self.m = hf.model
        self.lm_head = hf.lm_head
        c = hf.config
        self.nh, self.nkv = c.num_attention_heads, c.num_key_value_heads
        self.D = c.hidden_size // c.num_attention_heads
        self.how = how

    def forward(self, input_ids, cache_position, attention_mask, *past):
        B, T = input_ids.shape
        h = self.m.embed_tokens(input_ids)
        cos, sin = self.m.rotary_emb(h, cache_position.unsqueeze(0))   # [1,T,D]
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        mask = causal_mask(attention_mask, cache_position)
        presents = []
        rep = self.nh // self.nkv
        for i, layer in enumerate(self.m.layers):
            at = layer.self_attn
            x = layer.input_layernorm(h)
            q = at.q_proj(x).view(B, T, self.nh, self.D).transpose(1, 2)
            k = at.k_proj(x).view(B, T, self.nkv, self.D).transpose(1, 2)
            v = at.v_proj(x).view(B, T, self.nkv, self.D).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            kc = update_cache(past[2 * i], k, cache_position, self.how)
            vc = update_cache(past[2 * i + 1], v, cache_position, self.how)
            presents += [kc, vc]
            L = kc.shape[2]
            kr = kc[:, :, None].expand(B, self.nkv, rep, L, self.D).reshape(B, self.nh, L, self.D)
            vr = vc[:, :, None].expand(B, self.nkv, rep, L, self.D).reshape(B, self.nh, L, self.D)
            s = torch.matmul(q, kr.transpose(-1, -2)) / math.sqrt(self.D) + mask
            a = torch.matmul(torch.softmax(s, dim=-1), vr)
            a = a.transpose(1, 2).reshape(B, T, -1)
            h = h + at.o_proj(a)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        logits = self.lm_head(self.m.norm(h))
        return (logits, *presents)


# ---------------------------------------------------------------- HF StaticCache path
class HfStaticStep(nn.Module):
    """Feeds the cache tensors into a transformers StaticCache and calls the HF model itself."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, cache_position, attention_mask, *past):
        cache = transformers.StaticCache(config=self.hf.config, max_cache_len=MAX_LEN)
        for i, layer in enumerate(cache.layers):
            k, v = past[2 * i].clone(), past[2 * i + 1].clone()
            layer.keys, layer.values = k, v
            layer.device = k.device
            layer.batch_size, layer.num_heads = k.shape[0], k.shape[1]
            layer.k_head_dim = layer.v_head_dim = k.shape[-1]
            layer.cumulative_length = cache_position[0].clone()
            layer.is_initialized = True
        out = self.hf(input_ids=input_ids, attention_mask=attention_mask, cache_position=cache_position,
                      position_ids=cache_position.unsqueeze(0), past_key_values=cache, use_cache=True)
        res = [out.logits]
        for layer in cache.layers:
            res += [layer.keys, layer.values]
        return tuple(res)


def io_names(n_layer):
    ins = ["input_ids", "cache_position", "attention_mask"]
    outs = ["logits"]
    for i in range(n_layer):
        ins += [f"past_key_{i}", f"past_value_{i}"]
        outs += [f"present_key_{i}", f"present_value_{i}"]
    return ins, outs


def kv_shape(hf, B):
    c = hf.config
    if hasattr(c, "n_head"):
        return (B, c.n_head, MAX_LEN, c.n_embd // c.n_head), c.n_layer
    return (B, c.num_key_value_heads, MAX_LEN, c.hidden_size // c.num_attention_heads), c.num_hidden_layers


def make_inputs(hf, B, start, T, seed, past_len=None):
    """Random cache with `start` valid slots (rest random garbage too: must be masked), T new tokens."""
    g = torch.Generator().manual_seed(seed)
    shp, nl = kv_shape(hf, B)
    ids = torch.randint(0, hf.config.vocab_size, (B, T), generator=g)
    pos = torch.arange(start, start + T, dtype=torch.int64)
    am = torch.zeros(B, MAX_LEN, dtype=torch.int64)
    am[:, : start + T] = 1
    past = [torch.randn(shp, generator=g) for _ in range(2 * nl)]
    return (ids, pos, am, *past)


class Explicit2(nn.Module):
    """Named, non-variadic signature for a 2-layer model (torch.export wants a flat argument list)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, cache_position, attention_mask, past_key_0, past_value_0, past_key_1, past_value_1):
        return self.inner(input_ids, cache_position, attention_mask, past_key_0, past_value_0, past_key_1, past_value_1)
