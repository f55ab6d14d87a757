// The pure-JS way to read a SafeTensors file, as a user without this library would write it:
// read the bytes, parse the JSON header, wrap typed arrays around the data.

/** `{ headerLen, header, dataStart }` of a SafeTensors file's bytes. */
export function parseHeader(buf) {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength)
  const headerLen = Number(dv.getBigUint64(0, true))
  const header = JSON.parse(buf.toString('utf8', 8, 8 + headerLen))
  return { headerLen, header, dataStart: 8 + headerLen }
}

/** Float32Array views of every F32 tensor of `buf` (copies where a view would be misaligned). */
export function f32Views(buf) {
  const { header, dataStart } = parseHeader(buf)
  const out = {}
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue
    if (t.dtype !== 'F32') throw new Error(`${name}: only F32 is handled here, not ${t.dtype}`)
    const [begin, end] = t.data_offsets
    const byteOffset = buf.byteOffset + dataStart + begin
    const n = (end - begin) / 4
    out[name] = byteOffset % 4 === 0
      ? new Float32Array(buf.buffer, byteOffset, n)
      : new Float32Array(buf.buffer.slice(byteOffset, byteOffset + n * 4))
  }
  return out
}

/** The stored bytes of one tensor, in a fresh ArrayBuffer (so 2/4/8-byte views are aligned). */
export function tensorBytes(buf, name) {
  const { header, dataStart } = parseHeader(buf)
  const t = header[name]
  if (!t) throw new Error(`no tensor ${name}`)
  const [begin, end] = t.data_offsets
  const copy = new Uint8Array(end - begin)
  copy.set(buf.subarray(dataStart + begin, dataStart + end))
  return { dtype: t.dtype, shape: t.shape, bytes: copy }
}

/** F16 bits → f32 by arithmetic (used once, to build the 65,536-entry table). */
export function f16ToF32(h) {
  const s = h & 0x8000 ? -1 : 1
  const e = (h >> 10) & 0x1f
  const m = h & 0x3ff
  if (e === 0) return s * m * 2 ** -24
  if (e === 31) return m ? NaN : s * Infinity
  return s * (1 + m / 1024) * 2 ** (e - 15)
}
