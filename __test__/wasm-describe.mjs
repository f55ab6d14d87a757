// What a test compares between the WebAssembly reader and the native addon: a file's
// description and every tensor in every `as` form (dtype, shape, array type, length and the
// SHA-256 of its bytes, or the error code), as plain JSON. The same module runs under Node
// (wasm.spec.ts, and the native side of wasm-browser.spec.ts) and in Chromium (the page
// wasm-browser.spec.ts serves), so both sides are described by one function.

export const MODES = ['native', 'F32', 'F64', 'raw']

/** JSON that keeps what JSON cannot hold: bigints, typed arrays (by type), non-finite numbers. */
export function canon(value) {
  return JSON.parse(
    JSON.stringify(value ?? null, (_, v) => {
      if (typeof v === 'bigint') return `${v}n`
      if (typeof v === 'number' && !Number.isFinite(v)) return String(v)
      if (ArrayBuffer.isView(v)) return { [v.constructor.name]: Array.from(v, String) }
      return v
    }),
  )
}

async function sha256(view) {
  const digest = await crypto.subtle.digest('SHA-256', new Uint8Array(view.buffer, view.byteOffset, view.byteLength))
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('')
}

/** The TensorInfo fields both readers give (a native GgufFile's info adds ggmlType and offset). */
function common(info) {
  const { name, dtype, storedType, shape, byteLength, numel, dataOffsets } = info
  return { name, dtype, storedType, shape, byteLength, numel, ...(dataOffsets ? { dataOffsets } : {}) }
}

/** Everything a reader gives of an open file (`getTensor` may be synchronous or not). */
export async function describe(file) {
  const out = {
    format: file.format,
    tensorNames: file.tensorNames,
    numParameters: file.numParameters,
    metadata: canon(file.metadata),
    ...(file.format === 'gguf' ? { metadataKeys: Object.keys(file.metadata), metadataTypes: file.metadataTypes } : {}),
    tensors: {},
  }
  for (const name of file.tensorNames) {
    const forms = { info: common(file.info(name)) }
    for (const as of MODES) {
      try {
        const t = await file.getTensor(name, { as })
        forms[as] = { name: t.name, dtype: t.dtype, shape: t.shape, kind: t.data.constructor.name, length: t.data.length, sha256: await sha256(t.data) }
      } catch (e) {
        forms[as] = { code: e.code }
      }
    }
    out.tensors[name] = forms
  }
  return out
}
