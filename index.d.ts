// safetensors-node: the generated native binding's types (binding.d.ts), plus remote files
// and directories (lib/remote.js).
import type { GetOptions, LoadPretrainedOptions, Tensor, TensorInfo } from './binding'

export * from './binding'

export interface OpenUrlOptions {
  /** Extra request headers (e.g. Authorization). */
  headers?: Record<string, string>
  /** Per-request timeout, including the body (default 30,000 ms). */
  timeoutMs?: number
  /** Retries of network errors, timeouts, short bodies and 5xx answers, with exponential backoff (default 2). */
  retries?: number
  /** First backoff delay (default 200 ms; doubles each retry). */
  retryDelayMs?: number
  /** Parallel requests of tensorsAsync (default 8). */
  concurrency?: number
  /** Called after each request with the bytes transferred so far. */
  onProgress?: (p: { loadedBytes: number; totalBytes: number | null }) => void
}

/** A SafeTensors file behind a URL: its header is validated at open, tensors fetched on demand. */
export declare class RemoteSafeTensorsFile {
  readonly url: string
  readonly path: string
  readonly metadata: Record<string, string> | null
  readonly tensorNames: string[]
  readonly numParameters: number
  readonly byteLength: number
  /** Bytes transferred so far (header and tensors). */
  readonly bytesFetched: number
  has(name: string): boolean
  info(name: string): TensorInfo
  /** Throws ERR_INVALID_ARGUMENT (use getTensorAsync) unless the server sent the whole file. */
  getTensor(name: string, options?: GetOptions): Tensor
  getTensorAsync(name: string, options?: GetOptions): Promise<Tensor>
  getSlice(name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions): Tensor
  getSliceAsync(name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions): Promise<Tensor>
  tensors(options?: GetOptions): Record<string, Tensor>
  tensorsAsync(options?: GetOptions): Promise<Record<string, Tensor>>
}

/** A model directory behind a URL (same discovery order and path rules as a local one). */
export declare class RemoteModel {
  readonly dir: string
  readonly config: Record<string, unknown>
  readonly format: 'safetensors' | 'sharded-safetensors' | 'mlx'
  readonly files: string[]
  readonly tensorNames: string[]
  readonly numParameters: number
  readonly bytesFetched: number
  has(name: string): boolean
  getTensor(name: string, options?: GetOptions): Tensor
  getTensorAsync(name: string, options?: GetOptions): Promise<Tensor>
  tensors(options?: GetOptions): Record<string, Tensor>
  tensorsAsync(options?: GetOptions): Promise<Record<string, Tensor>>
}

declare module './binding' {
  namespace SafeTensorsFile {
    /** Open a SafeTensors file over HTTP(S) with range requests. */
    function openUrl(url: string, options?: OpenUrlOptions): Promise<RemoteSafeTensorsFile>
  }
  namespace Model {
    /** Load a model directory: a local path, or an http(s):// URL (fetched lazily). */
    function loadPretrained(dir: `http://${string}` | `https://${string}`, options?: LoadPretrainedOptions & OpenUrlOptions): Promise<RemoteModel>
    function loadPretrained(dir: string, options?: LoadPretrainedOptions): Promise<Model>
    function loadPretrained(dir: string, options?: LoadPretrainedOptions & OpenUrlOptions): Promise<Model | RemoteModel>
  }
}

/** Describe a SafeTensors file, sharded index, GGUF file, weights.mlx or model directory. */
export declare function inspect(path: string): Promise<import('./binding').FileReport>
