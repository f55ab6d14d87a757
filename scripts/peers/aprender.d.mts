/** Build aprender-peer once per version of its sources (outside the clone); its path. */
export function ensureAprenderPeer(): string
