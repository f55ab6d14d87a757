// safetensors-node/wasm (and the package's `browser` entry): the reader compiled to
// WebAssembly. Everything is asynchronous; results and error codes are the native addon's.
import type { DType, TensorInfo, TensorInput, WeightsFormat } from '../binding.js'
import type { GetOptions, Tensor, TensorAs, TensorData } from '../index.js'

export type { DType, GetOptions, Tensor, TensorAs, TensorData, TensorInfo, TensorInput, WeightsFormat }

export interface WasmOpenOptions {
  /** Read the input as this format instead of recognising it by its bytes. */
  format?: WeightsFormat
  /** URLs: extra request headers (e.g. Authorization), sent with every Range request. */
  headers?: Record<string, string>
  /** URLs: aborts the requests (ERR_ABORTED). */
  signal?: AbortSignal
  /** URLs: the `fetch` to use (default: globalThis.fetch). */
  fetch?: typeof fetch
  /** Bytes: the name errors give the input (default 'bytes'). */
  name?: string
}

/** A weights file read in WebAssembly: its header at open, each tensor's bytes when asked for. */
export interface WasmWeightsFile {
  readonly format: WeightsFormat
  /** The URL, the File's name ('blob' for an unnamed Blob) or options.name. */
  readonly path: string
  /** SafeTensors' `__metadata__`; GGUF's pairs as JSON (as `WeightsFile.metadata`); or null. */
  readonly metadata: Record<string, unknown> | null
  readonly config: null
  readonly tensorNames: string[]
  readonly numParameters: number
  has(name: string): boolean
  info(name: string): TensorInfo
  /** Block types (GGUF Q8_0, Q4_K, IQ…) decode to Float32Array; `as: 'raw'` gives the stored bytes. */
  getTensor<A extends TensorAs = 'native'>(name: string, options?: Pick<GetOptions<A>, 'as'> | null): Promise<Tensor<TensorData<A>>>
  getTensorAsync<A extends TensorAs = 'native'>(name: string, options?: Pick<GetOptions<A>, 'as'> | null): Promise<Tensor<TensorData<A>>>
  tensors<A extends TensorAs = 'native'>(options?: Pick<GetOptions<A>, 'as'> | null): Promise<Record<string, Tensor<TensorData<A>>>>
  /** Free the file's WebAssembly memory now; later calls throw ERR_CLOSED. */
  close(): void
  [Symbol.dispose](): void
}

/**
 * Open a weights file from a URL (Range requests), a Blob or File (`slice`), or bytes.
 * SafeTensors and GGUF are read by ranges; NumPy and PyTorch files whole.
 */
export declare function openWeights(input: string | URL | Blob | ArrayBuffer | ArrayBufferView, options?: WasmOpenOptions | null): Promise<WasmWeightsFile>

/**
 * Load the .wasm from elsewhere than beside this module (a CDN, a bundler's asset URL):
 * a URL, a Response, bytes or a compiled module. Call before the first open.
 */
export declare function initWasm(source: string | URL | Response | ArrayBuffer | Uint8Array | WebAssembly.Module): Promise<void>

/**
 * The bytes of a SafeTensors file holding `tensors`, byte-identical to the native
 * `serialize`; `options.metadata` is the file's `__metadata__`.
 */
export declare function serialize(tensors: Record<string, TensorInput>, options?: { metadata?: Record<string, string> } | null): Promise<Uint8Array>
