/* safetensors-node: hand-written declarations shared by the generated bindings below. */

/** The element types of the SafeTensors format (the reference implementation's full list). */
export type DType =
  | 'BOOL' | 'U8' | 'I8' | 'U16' | 'I16' | 'F16' | 'BF16' | 'U32' | 'I32' | 'F32' | 'U64' | 'I64' | 'F64'
  | 'F8_E4M3' | 'F8_E5M2' | 'F8_E8M0' | 'F8_E4M3FNUZ' | 'F8_E5M2FNUZ' | 'F4' | 'F6_E2M3' | 'F6_E3M2' | 'C64'

/** A tensor to write: `dtype` defaults to the dtype of `data` (Float32Array → F32, number[] → F32). */
export interface TensorInput {
  dtype?: DType
  shape: number[]
  data: ArrayBufferView | number[]
}

/** Options of `Model.loadPretrained`. */
export interface LoadPretrainedOptions {
  /** The default form of `getTensor`/`tensors`: `'F32'` upcasts every float type (the MLX-Node behaviour). */
  as?: 'native' | 'F32'
  /** Called as each weight file is opened or parsed (at least once per file). */
  onProgress?: (p: { file: string; loadedBytes: number; totalBytes: number }) => void
}
