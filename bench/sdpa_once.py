#!/usr/bin/env python3
"""Launches one peer attention kernel (torch SDPA's cuDNN or flash backend) a few times, for
Nsight Compute to profile beside our packages (bench/ncu_packages.sh profiles ours):

  ncu --set full -k regex:'sdpa|fmha|flash' --launch-skip 2 --launch-count 1 -o DEST \
      python3 bench/sdpa_once.py --backend cudnn --b 32 --h 32 --s 512 --d 64 --causal

The inputs are bf16 in [B, H, S, D], as bench/attention_rows.py times them.
"""
import argparse

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["cudnn", "flash"], default="cudnn")
    p.add_argument("--b", type=int, required=True)
    p.add_argument("--h", type=int, required=True)
    p.add_argument("--s", type=int, required=True)
    p.add_argument("--d", type=int, required=True)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--launches", type=int, default=4)
    args = p.parse_args()
    shape = (args.b, args.h, args.s, args.d)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    backend = SDPBackend.CUDNN_ATTENTION if args.backend == "cudnn" else SDPBackend.FLASH_ATTENTION
    with sdpa_kernel(backend):
        for _ in range(args.launches):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
