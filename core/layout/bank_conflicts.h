// Shared-memory bank-conflict analysis, used to choose swizzles.
//
// Model (NVIDIA Volta through Hopper): shared memory has 32 banks of 4-byte words; byte address
// a lies in word a/4 and bank (a/4) % 32. A warp instruction whose lanes each access `w` bytes
// (w = 1, 2, 4, 8 or 16, naturally aligned) is served in phases of 128/w lanes (all 32 lanes for
// w <= 4, half-warps for 8 bytes, quarter-warps for 16 bytes -- which is also how ldmatrix
// serves the eight row addresses of each 8x8 matrix). A phase takes as many wavefronts as the
// largest number of *distinct* words any one bank must deliver; lanes reading the same word are
// served together (broadcast). A conflict-free phase takes one wavefront.
//
// Example: a 64x64 bf16 tile stored row-major has 128-byte rows, so one 16-byte column chunk of
// 8 consecutive rows -- one ldmatrix phase -- lies in the same 4 banks: 8 wavefronts instead of
// 1. With the SW128 swizzle the 8 rows' chunks land in 8 different 16-byte bank groups: 1.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/layout/result.h"
#include "core/layout/swizzle.h"
#include "core/layout/tv_layout.h"

namespace nautilus::layout {

struct BankConflicts {
  int64_t instructions = 0;      // warp instructions analysed
  int64_t wavefronts = 0;        // wavefronts they take
  int64_t ideal_wavefronts = 0;  // one per phase that has an active lane
  // Extra wavefronts caused by conflicts (0 when conflict-free).
  int64_t conflicts() const { return wavefronts - ideal_wavefronts; }

  bool operator==(const BankConflicts&) const = default;
};

// One phase of a warp instruction: the lanes the hardware serves together.
struct BankPhaseConflicts {
  int phase = 0;                       // lane / lanes per phase (0-based within the instruction)
  int64_t wavefronts = 0;              // the most distinct words one bank delivers; 1: no conflict
  std::vector<int> conflicting_banks;  // banks delivering more than one distinct word, ascending
};

// The phases of one warp instruction that have an active lane, in phase order:
// byte_addresses[lane] is the first byte of that lane's `access_bytes` access, or nullopt for an
// inactive lane (at most 32 lanes). The studio's bank grid draws these phases; every count below
// sums them. Fails like count_bank_conflicts.
Result<std::vector<BankPhaseConflicts>> bank_phases(
    const std::vector<std::optional<int64_t>>& byte_addresses, int access_bytes);

// One warp instruction: byte_addresses[lane] is the first byte of that lane's `access_bytes`
// access (at most 32 lanes; a shorter list means the remaining lanes are inactive). Fails on an
// unsupported width or a misaligned or negative address.
Result<BankConflicts> count_bank_conflicts(const std::vector<int64_t>& byte_addresses,
                                           int access_bytes);

// Every warp instruction that a TV layout describes on a shared-memory tile: `smem` maps the
// TV layout's tile coordinates to element offsets (size of each mode equal to the tile's), and
// each thread's values, taken `vector_elements` at a time, form one access of
// vector_elements * element_bytes bytes. Warp w is threads [32w, 32w + 32); instruction k of a
// warp is every lane's k-th vector. Fails when a vector is not contiguous and aligned in shared
// memory -- the instruction could then not be used on this layout.
// With tv = tile_tv_layout(ldmatrix_x4_addresses(), (64,64)) -- 16 ldmatrix.x4 per warp -- a
// row-major 64x64 bf16 tile (64,64):(64,1) takes 512 wavefronts where 64 are ideal (8-way
// conflicts in every phase); Sw<3,3,3> o (64,64):(64,1) takes 64.
Result<BankConflicts> count_bank_conflicts(const ComposedLayout& smem, int element_bytes,
                                           const TVLayout& access, int64_t vector_elements);

}  // namespace nautilus::layout
