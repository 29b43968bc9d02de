// The campaigns' deterministic choices (mulberry32): the same seed draws the same faults, so a
// campaign can be replayed. Shared by examples/nqueens/campaign.ts and examples/rollback/campaign.ts.
export function seededRandom(seed: number): () => number {
  let s = seed;
  return (): number => {
    s = (s + 0x6d2b79f5) | 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
