// safetensors-node: the public API's types. The generated binding.d.ts declares the native
// module, internal calls included; this file declares exactly what index.js exports
// (__test__/exports.spec.ts checks the two against each other) and types its results by
// their options (`getTensor(name, { as: 'F32' })` is a `Tensor<Float32Array>`).
// index.d.mts gives ES modules the same declarations.
import type {
  ConvertOptions,
  ConvertReport,
  DiffReport,
  DType,
  FileReport,
  GgufOptions,
  GgufValue,
  LoadPretrainedOptions,
  Matrix,
  ModelSaveOptions,
  OpenOptions,
  OpenWeightsOptions,
  SaveOptions,
  SaveReport,
  TensorInfo,
  TensorInput,
  TypedArray,
  ValidationReport,
  VerifyReport,
  WeightsFormat,
  WriteOptions,
} from './binding'

export type {
  ConvertOptions,
  ConvertProgress,
  ConvertReport,
  DiffReport,
  DiffTotals,
  DType,
  ErrorCode,
  FileReport,
  GgufOptions,
  GgufValue,
  GgufValueTypeName,
  LayerDiff,
  LoadPretrainedOptions,
  Matrix,
  MetadataEditValue,
  ModelSaveOptions,
  OpenOptions,
  OpenWeightsOptions,
  SafeTensorsError,
  SaveOptions,
  SaveReport,
  TensorDiff,
  TensorInfo,
  TensorInput,
  TypedArray,
  ValidationReport,
  VerifiedFile,
  VerifyReport,
  WeightsFormat,
  WriteOptions,
} from './binding'

/** The forms `getTensor` and its relatives return: the stored type's own array, or a conversion. */
export type TensorAs = 'native' | 'F32' | 'F64' | 'raw'

export interface GetOptions<A extends TensorAs = TensorAs> {
  /** 'native' (default): the stored type's array; 'F32' / 'F64': converted floats; 'raw': the stored bytes. */
  as?: A
  /**
   * Unset or `true`: an owned copy (an ordinary ArrayBuffer, freed by the garbage collector
   * like any other, even inside a synchronous loop). `false`: a view of the file's (private,
   * copy-on-write) mapping when the data is aligned and needs no conversion, else a copy; a
   * view keeps the file mapped until it is collected and the event loop turns.
   */
  copy?: boolean
}

/** The array `as: A` gives: Float32Array for 'F32', Float64Array for 'F64', Uint8Array for 'raw'. */
export type TensorData<A extends TensorAs> = A extends 'F32'
  ? Float32Array
  : A extends 'F64'
    ? Float64Array
    : A extends 'raw'
      ? Uint8Array
      : TypedArray

export interface Tensor<T extends TypedArray = TypedArray> {
  name: string
  /** The stored dtype (whatever `as` converted the data to). */
  dtype: DType
  shape: number[]
  data: T
}

/** One entry per leading dimension: `[start, stop)`, an index (drops the dimension), or null for all of it. */
export type SliceRange = [number, number] | number | null

/**
 * A SafeTensors file, validated at open and read lazily. Tensors come back as copies, or as
 * views of the file's mapping with `copy: false` (see GetOptions).
 */
export declare class SafeTensorsFile {
  /** Instances come from `open`, `openAsync`, `fromBytes` and `openUrl` (`new` throws ERR_INVALID_ARGUMENT). */
  private constructor()
  /** Open and validate a file. `backend: 'read'` uses plain reads instead of a memory map. */
  static open(path: string, options?: OpenOptions | null): SafeTensorsFile
  /** `open` off the event loop. */
  static openAsync(path: string, options?: OpenOptions | null): Promise<SafeTensorsFile>
  /** Validate a whole file held in memory (the bytes are copied). */
  static fromBytes(bytes: Uint8Array): SafeTensorsFile
  /** Open a SafeTensors file over HTTP(S) with range requests. */
  static openUrl(url: string, options?: OpenUrlOptions): Promise<RemoteSafeTensorsFile>
  get path(): string | null
  /** The `__metadata__` map, or null. */
  get metadata(): Record<string, string> | null
  /** Tensor names in data-offset order. */
  get tensorNames(): string[]
  get numParameters(): number
  /** Size of the whole file in bytes. */
  get byteLength(): number
  /**
   * Whether the file on disk changed since it was opened (one `stat`): removed
   * (ERR_NOT_FOUND), replaced (ERR_IO; this object keeps reading the file it opened),
   * modified in place (ERR_IO), or resized in place (ERR_INCOMPLETE_FILE: reading a
   * memory map past the new end would fault). Always ok for `fromBytes`.
   */
  validate(): ValidationReport
  has(name: string): boolean
  /** Every SafeTensors tensor has its `dataOffsets`. */
  info(name: string): TensorInfo & { dataOffsets: [number, number] }
  getTensor<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getTensorAsync<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  /** A sub-tensor along the leading dimensions; negative values count from the end. */
  getSlice<A extends TensorAs = 'native'>(name: string, ranges: SliceRange[], options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getSliceAsync<A extends TensorAs = 'native'>(name: string, ranges: SliceRange[], options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  /** Every tensor, keyed by name in data-offset order. */
  tensors<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Record<string, Tensor<TensorData<A>>>
  tensorsAsync<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Promise<Record<string, Tensor<TensorData<A>>>>
  /**
   * Release the file now: later calls throw ERR_CLOSED, and its memory goes as soon as no
   * array handed out before views it (those stay valid). A second call does nothing.
   */
  close(): void
  /** `close()`, for `using file = …` (explicit resource management). */
  [Symbol.dispose](): void
}

/**
 * A pretrained model directory: `config.json` plus weights (`weights.safetensors`,
 * `model.safetensors`, a sharded `model.safetensors.index.json`, `pytorch_model.bin` or its
 * sharded index, or `weights.mlx`; the first present).
 */
export declare class Model {
  /** Instances come from `loadPretrained` and `loadPretrainedSync` (`new` throws ERR_INVALID_ARGUMENT). */
  private constructor()
  /**
   * Load a model directory: a local path, an http(s):// URL (fetched lazily), or a Hugging
   * Face model id `org/name` (a local path of that name wins): its snapshot in the local
   * Hugging Face cache, else, with `endpoint` or HF_ENDPOINT set, read lazily over HTTP (a
   * `RemoteModel`; without `endpoint` in the options the result is typed `Model`, so with
   * HF_ENDPOINT set check `instanceof Model`). A GGUF file (local or by URL; a split set's
   * first file opens the set) is a model too: `config` `{}`, its key/values as `metadata`.
   */
  static loadPretrained(dir: `http://${string}` | `https://${string}`, options?: LoadPretrainedOptions & OpenUrlOptions): Promise<RemoteModel>
  static loadPretrained(dir: string, options?: LoadPretrainedOptions & CachedModelOptions): Promise<Model>
  static loadPretrained(dir: string, options?: LoadPretrainedOptions & ModelIdOptions & OpenUrlOptions): Promise<Model | RemoteModel>
  /** `loadPretrained` of a local directory or of a model id in the local cache, on the calling thread. */
  static loadPretrainedSync(dir: string, options?: LoadPretrainedOptions & CachedModelOptions): Model
  get dir(): string
  /** The directory (as `dir`). */
  get path(): string
  /** config.json, parsed (keys as written). */
  get config(): Record<string, unknown>
  /** The format of the weights (each weight file is recognised by its bytes). */
  get format(): WeightsFormat
  /** Weight files used, relative to `dir`. */
  get files(): string[]
  /** The weights' key/values (a SafeTensors `__metadata__`, …), or null. */
  get metadata(): Record<string, unknown> | null
  get tensorNames(): string[]
  get numParameters(): number
  has(name: string): boolean
  info(name: string): TensorInfo
  getTensor<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getTensorAsync<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  tensors<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Record<string, Tensor<TensorData<A>>>
  tensorsAsync<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Promise<Record<string, Tensor<TensorData<A>>>>
  /** A sub-tensor along the leading dimensions (as `SafeTensorsFile.getSlice`); negative values count from the end. */
  getSlice<A extends TensorAs = 'native'>(name: string, ranges: SliceRange[], options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getSliceAsync<A extends TensorAs = 'native'>(name: string, ranges: SliceRange[], options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  /**
   * Write the model to `dir` in transformers' layout: config.json and `model.safetensors`, or
   * shards with `model.safetensors.index.json` when `maxShardBytes` asks for them.
   */
  save(dir: string, options?: ModelSaveOptions | null): Promise<SaveReport>
  /**
   * Predictions of a directory saved by `LinearRegression`/`LogisticRegression.save`
   * (config.json `model_type`), as that class's `predict` gives them: linear → one value per
   * row (Float32Array); logistic → one class label per row (Int32Array). Other models:
   * ERR_INVALID_MODEL.
   */
  predict(x: Matrix): Float32Array | Int32Array
  /**
   * Class probabilities of a classifier directory (`LogisticRegression.save`): rows × classes,
   * row-major, columns in `config.classes` order. A regression model: ERR_INVALID_ARGUMENT.
   */
  predictProba(x: Matrix): Float32Array
  /** Release the weights now (see `SafeTensorsFile.close`); a `save` already started finishes. */
  close(): void
  [Symbol.dispose](): void
}

/** Ordinary least squares (pivoted QR; the minimum-norm solution when columns are dependent). */
export declare class LinearRegression {
  constructor(options?: { fitIntercept?: boolean } | null)
  fit(x: Matrix, y: ArrayLike<number>): this
  predict(x: Matrix): Float32Array
  /** `predict` off the event loop (for large batches; the input is copied first). */
  predictAsync(x: Matrix): Promise<Float32Array>
  /** R² of the predictions. */
  score(x: Matrix, y: ArrayLike<number>): number
  get coefficients(): Float32Array
  get intercept(): number
  get nFeatures(): number
  get isFitted(): boolean
  get fitIntercept(): boolean
  /** Save as SafeTensors in aprender's layout, with `model_type`, `n_features`, … and the caller's metadata in `__metadata__`. */
  saveSafetensors(path: string, options?: SaveOptions | null): void
  saveSafetensorsAsync(path: string, options?: SaveOptions | null): Promise<void>
  /** Load a file written by `saveSafetensors` or by aprender. */
  static loadSafetensors(path: string): LinearRegression
  static loadSafetensorsAsync(path: string): Promise<LinearRegression>
  /** Write `config.json` + `weights.safetensors` to `dir` (loadable by `Model.loadPretrained`). */
  save(dir: string, options?: WriteOptions | null): Promise<void>
  /** Export to GGUF (`quantization` applies to 2-D coefficient matrices). */
  toGguf(path: string, options?: GgufOptions | null): void
  /** Export to ONNX (IR 8, opset 17), runnable by ONNX Runtime. */
  toOnnx(path: string, options?: WriteOptions | null): void
}

/**
 * L2-regularised logistic regression (binary: sigmoid; 3+ classes: multinomial softmax),
 * the objective of scikit-learn's `LogisticRegression(C=…)`, solved by Newton's method.
 */
export declare class LogisticRegression {
  /** `c`: inverse L2 strength (default 1.0); `maxIter`: Newton iterations (default 100); `tol`: default 1e-4. */
  constructor(options?: { fitIntercept?: boolean; c?: number; maxIter?: number; tol?: number } | null)
  /** Fit to integer class labels (any integers; two classes or more). */
  fit(x: Matrix, y: ArrayLike<number>): this
  /** Predicted class labels. */
  predict(x: Matrix): Int32Array
  /** Class probabilities, rows × classes, row-major (columns in `classes` order). */
  predictProba(x: Matrix): Float32Array
  predictAsync(x: Matrix): Promise<Int32Array>
  predictProbaAsync(x: Matrix): Promise<Float32Array>
  /** Accuracy. */
  score(x: Matrix, y: ArrayLike<number>): number
  /** The class labels, sorted ascending. */
  get classes(): Int32Array
  /** Binary: `[nFeatures]`; multiclass: `[nClasses × nFeatures]`, row-major. */
  get coefficients(): Float32Array
  /** Binary: one value; multiclass: one per class. */
  get intercept(): Float32Array
  get nFeatures(): number
  get isFitted(): boolean
  /** Newton iterations of the last fit, and whether it converged within `maxIter`. */
  get nIter(): number | null
  get converged(): boolean | null
  /** Save as SafeTensors in aprender's layout, with `model_type`, `n_features`, … and the caller's metadata in `__metadata__`. */
  saveSafetensors(path: string, options?: SaveOptions | null): void
  saveSafetensorsAsync(path: string, options?: SaveOptions | null): Promise<void>
  /** Load a file written by `saveSafetensors` or by aprender. */
  static loadSafetensors(path: string): LogisticRegression
  static loadSafetensorsAsync(path: string): Promise<LogisticRegression>
  /** Write `config.json` + `weights.safetensors` to `dir` (loadable by `Model.loadPretrained`). */
  save(dir: string, options?: WriteOptions | null): Promise<void>
  /** Export to GGUF (`quantization` applies to 2-D coefficient matrices). */
  toGguf(path: string, options?: GgufOptions | null): void
  /** Export to ONNX (IR 8, opset 17), runnable by ONNX Runtime. */
  toOnnx(path: string, options?: WriteOptions | null): void
}

/** Open a file and read every tensor. */
export declare function loadFile<A extends TensorAs = 'native'>(path: string, options?: GetOptions<A> | null): Record<string, Tensor<TensorData<A>>>
export declare function loadFileAsync<A extends TensorAs = 'native'>(path: string, options?: GetOptions<A> | null): Promise<Record<string, Tensor<TensorData<A>>>>
/** Write tensors to a SafeTensors file, atomically (temp file + rename). */
export declare function saveFile(path: string, tensors: Record<string, TensorInput>, options?: SaveOptions | null): void
/** `saveFile` off the event loop (the data is copied first, so the caller may reuse its arrays at once). */
export declare function saveFileAsync(path: string, tensors: Record<string, TensorInput>, options?: SaveOptions | null): Promise<void>
/** The bytes of a SafeTensors file holding `tensors`. */
export declare function serialize(tensors: Record<string, TensorInput>, options?: { metadata?: Record<string, string> } | null): Buffer
/**
 * Convert any weights file or model directory `openWeights` reads (a path, a model id, or an
 * http(s):// URL of one) to `options.to` (ONNX takes a linear/logistic regression model).
 * Streams tensor by tensor.
 */
export declare function convert(input: string, output: string, options: ConvertOptions & HttpOptions & ModelIdOptions): Promise<ConvertReport>
/** Describe any weights file or model directory `openWeights` reads (a path, a model id, or an http(s):// URL of one). */
export declare function inspect(path: string, options?: HttpOptions & ModelIdOptions): Promise<FileReport>
/** Every problem found in a file or directory (not only the first), with codes (a path, a model id, or an http(s):// URL of one). */
export declare function validate(path: string, options?: HttpOptions & ModelIdOptions): Promise<ValidationReport>
/** How `convert`, `inspect` and `validate` fetch an http(s):// input (as `openUrl` does). */
export type HttpOptions = Pick<OpenUrlOptions, 'headers' | 'timeoutMs' | 'retries' | 'retryDelayMs'>

/** @deprecated The same as `TensorInfo`, which every reader's `info(name)` returns. */
export type WeightsTensorInfo = TensorInfo

/**
 * A weights file of any format this package reads, recognised by its bytes: SafeTensors, a
 * sharded index, a model directory, GGUF, PyTorch, NumPy, weights.mlx. Tensors are copies,
 * or views of the file's mapping with `copy: false` where the bytes allow (see GetOptions).
 */
export interface WeightsFile {
  readonly format: WeightsFormat
  /** The file or directory opened (a URL for remote files). */
  readonly path: string | null
  /** The format's key/values (SafeTensors `__metadata__`, GGUF's pairs, …), or null. */
  readonly metadata: Record<string, unknown> | null
  /** config.json of a model directory, or null. */
  readonly config: Record<string, unknown> | null
  /** In serving order (data order for SafeTensors, file order for GGUF). */
  readonly tensorNames: string[]
  readonly numParameters: number
  has(name: string): boolean
  info(name: string): TensorInfo
  /** Block types (GGUF Q8_0, Q4_K, …) decode to Float32Array; `as: 'raw'` gives the stored bytes. */
  getTensor<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getTensorAsync<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  tensors<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Record<string, Tensor<TensorData<A>>>
  tensorsAsync<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Promise<Record<string, Tensor<TensorData<A>>>>
  /** Release the file now (see `SafeTensorsFile.close`); later calls throw ERR_CLOSED. */
  close(): void
  [Symbol.dispose](): void
}

/** One tensor of a `GgufFile`: `TensorInfo` plus what the GGUF header says. */
export interface GgufTensorInfo extends TensorInfo {
  /** The ggml type as stored: 'Q4_K', 'F16', 'I32', … (the same as `storedType`). */
  ggmlType: string
  /** `[start, end)` of the stored bytes, relative to the data section. */
  dataOffsets: [number, number]
  /** Where the stored bytes start, from the start of the file. */
  offset: number
}

/**
 * A GGUF file (llama.cpp, ggml), validated at open and read lazily: the header as GGUF
 * describes it (version, alignment, typed metadata, each tensor's ggml type and offset) and
 * the tensors as `WeightsFile` serves them — block types (Q4_K, Q8_0, IQ2_XS, …) decoded to
 * Float32Array bit-exactly as gguf-py's `dequantize`, plain types as their typed array
 * (integers stay integers; F16/BF16 → Float32Array), `as: 'raw'` the stored bytes.
 * `openWeights` of a GGUF file returns one.
 */
export declare class GgufFile implements WeightsFile {
  /** Instances come from `open` and `openAsync` (and `openWeights`); `new` throws ERR_INVALID_ARGUMENT. */
  private constructor()
  /** Open and validate a GGUF file. `backend: 'read'` reads the whole file into memory instead of mapping it. */
  static open(path: string, options?: OpenOptions | null): GgufFile
  /** `open` off the event loop. */
  static openAsync(path: string, options?: OpenOptions | null): Promise<GgufFile>
  /** Open a GGUF file over HTTP(S): the header by range requests, tensors on demand. */
  static openUrl(url: string, options?: OpenUrlOptions): Promise<RemoteGgufFile>
  get format(): 'gguf'
  get path(): string | null
  /** The GGUF version (2 or 3). */
  get version(): number
  /** Alignment of the data section and of each tensor (`general.alignment`, default 32). */
  get alignment(): number
  /** Offset of the data section from the start of the file. */
  get dataOffset(): number
  /**
   * Every key/value in file order, typed: 8–32-bit integers and floats as numbers, 64-bit
   * integers as bigint, strings, booleans; numeric arrays as the typed array of their element
   * type, arrays of strings and booleans as JS arrays. Made at the first access; every access
   * after gives the same object. (Arrays of arrays, which ggml's reader refuses, are
   * ERR_INVALID_GGUF at open.)
   */
  get metadata(): Record<string, GgufValue>
  /** Each key's GGUF type: 'UINT32', 'FLOAT32', 'STRING', …, arrays as 'ARRAY[INT32]'. */
  get metadataTypes(): Record<string, string>
  /** Always null (a model directory's config.json). */
  get config(): null
  /** In file order. */
  get tensorNames(): string[]
  get numParameters(): number
  /** Size of the whole file in bytes. */
  get byteLength(): number
  has(name: string): boolean
  info(name: string): GgufTensorInfo
  getTensor<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getTensorAsync<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  /** Every tensor, keyed by name in file order. */
  tensors<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Record<string, Tensor<TensorData<A>>>
  tensorsAsync<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Promise<Record<string, Tensor<TensorData<A>>>>
  /** Release the file now (see `SafeTensorsFile.close`); later calls throw ERR_CLOSED. */
  close(): void
  [Symbol.dispose](): void
}

/**
 * Open a weights file of any format this package reads, recognised by its bytes (`options.format`
 * forces one): SafeTensors, a sharded index, a model directory, GGUF, PyTorch, NumPy,
 * weights.mlx. An input of another kind is ERR_UNKNOWN_FORMAT naming what it looks like; a
 * GGUF file is a `GgufFile`. An http(s) URL gives a `RemoteWeights` (a `RemoteGgufFile` for
 * GGUF): SafeTensors and GGUF by their headers, tensors fetched when read; PyTorch, NumPy and
 * weights.mlx read whole (at most 1 GiB); a URL whose file does not exist, as a model
 * directory.
 */
export declare function openWeights(pathOrUrl: `http://${string}` | `https://${string}`, options?: (OpenWeightsOptions & OpenUrlOptions) | null): Promise<RemoteWeights>
export declare function openWeights(pathOrUrl: string, options?: (OpenWeightsOptions & CachedModelOptions) | null): Promise<WeightsFile>
export declare function openWeights(pathOrUrl: string, options?: (OpenWeightsOptions & OpenUrlOptions & CachedModelOptions) | null): Promise<WeightsFile | RemoteWeights>
/** `openWeights` of a local path, on the calling thread (a URL is ERR_INVALID_ARGUMENT). */
export declare function openWeightsSync(path: string, options?: (OpenWeightsOptions & CachedModelOptions) | null): WeightsFile

/** Where `loadPretrained` looks up a Hugging Face model id in the local cache. */
export interface CachedModelOptions {
  /** A branch, tag or commit hash (default 'main'). */
  revision?: string
  /** The cache directory (default: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub). */
  cacheDir?: string
}

/** `loadPretrained` of a Hugging Face model id: the cache, else HTTP. */
export interface ModelIdOptions extends CachedModelOptions {
  /** Read a model id the cache lacks from `{endpoint}/{id}/resolve/{revision}/{file}` (default: HF_ENDPOINT; neither set: no network). */
  endpoint?: string
  /** Sent as `Authorization: Bearer` to the endpoint's origin only (default: HF_TOKEN). */
  token?: string
}

export interface OpenUrlOptions {
  /** Extra request headers (e.g. Authorization). */
  headers?: Record<string, string>
  /** Per-request timeout, including the body (default 30,000 ms). */
  timeoutMs?: number
  /** Retries of network errors, timeouts, short bodies and 5xx answers, with exponential backoff (default 2). */
  retries?: number
  /** First backoff delay (default 200 ms; doubles each retry). */
  retryDelayMs?: number
  /** Parallel requests of `tensors` and of an open's shards (default 8). */
  concurrency?: number
  /** Called after each request with the bytes transferred so far; `totalBytes` is null while unknown. */
  onProgress?: (p: { loadedBytes: number; totalBytes: number | null }) => void
}

/**
 * A weights file or model directory behind a URL (from `SafeTensorsFile.openUrl`,
 * `GgufFile.openUrl`, `openWeights(url)`, or `Model.loadPretrained` of a URL or of a model id
 * read over HTTP): opened by the core from byte ranges as a local one is (headers, files read
 * whole under their caps, a directory's config.json, discovery order and shards), each
 * tensor's stored bytes fetched when it is read. Every read may touch the network, so every
 * read returns a Promise: `getTensor`, `getSlice` and `tensors`, and their `…Async` aliases
 * (code written for a local reader's `…Async` calls runs unchanged).
 */
export interface RemoteWeights {
  /** The URL opened. */
  readonly url: string
  /** The same URL. */
  readonly path: string
  /** A model directory's URL (ending in '/'), or null for a file. */
  readonly dir: string | null
  readonly format: WeightsFormat
  /** A model directory's config.json, or null for a file. */
  readonly config: Record<string, unknown> | null
  /** A model directory's weight files, relative to it (empty for a file). */
  readonly files: string[]
  readonly metadata: Record<string, string> | Record<string, GgufValue> | null
  readonly tensorNames: string[]
  readonly numParameters: number
  /** The length of the weight files together. */
  readonly byteLength: number
  /** Bytes transferred so far (headers and tensors). */
  readonly bytesFetched: number
  has(name: string): boolean
  info(name: string): TensorInfo
  getTensor<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  getTensorAsync<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  getSlice<A extends TensorAs = 'native'>(name: string, ranges: SliceRange[], options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  getSliceAsync<A extends TensorAs = 'native'>(name: string, ranges: SliceRange[], options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  tensors<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Promise<Record<string, Tensor<TensorData<A>>>>
  tensorsAsync<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Promise<Record<string, Tensor<TensorData<A>>>>
  /** Release the listing now (see `SafeTensorsFile.close`); later calls throw ERR_CLOSED. */
  close(): void
  [Symbol.dispose](): void
}

/** What `SafeTensorsFile.openUrl` returns: a `RemoteWeights` of one SafeTensors file. */
export interface RemoteSafeTensorsFile extends RemoteWeights {
  readonly format: 'safetensors'
  readonly dir: null
  readonly config: null
  readonly metadata: Record<string, string> | null
  /** Every SafeTensors tensor has its `dataOffsets`. */
  info(name: string): TensorInfo & { dataOffsets: [number, number] }
}

/** What `GgufFile.openUrl` (and `openWeights(url)` of a GGUF file) returns: a `RemoteWeights` with what only GGUF's header has. */
export interface RemoteGgufFile extends RemoteWeights {
  readonly format: 'gguf'
  readonly dir: null
  readonly config: null
  readonly version: number
  readonly alignment: number
  readonly dataOffset: number
  readonly metadata: Record<string, GgufValue>
  readonly metadataTypes: Record<string, string>
  info(name: string): GgufTensorInfo
}

/** What `Model.loadPretrained` of a URL (or of a model id read over HTTP) returns: a `RemoteWeights` of a model directory. */
export interface RemoteModel extends RemoteWeights {
  readonly dir: string
  readonly config: Record<string, unknown>
}

/** How `download` reaches the Hub and what it takes. */
export interface DownloadOptions extends ModelIdOptions, HttpOptions {
  /** Only the files matching one of these globs (fnmatch, as huggingface_hub's `allow_patterns`: `*` crosses `/`; a pattern ending in `/` takes the folder). */
  include?: string | string[]
  /** None of the files matching one of these globs (`ignore_patterns`). */
  exclude?: string | string[]
  /** Files fetched at once (default 4). */
  concurrency?: number
  /** Called as bytes land: `loadedBytes` counts files already in the cache and resumed bytes too; `fetchedBytes` what crossed the network. */
  onProgress?: (p: DownloadProgress) => void
  /** Cancels the download (ERR_ABORTED); each file fetched so far stays, each file under way keeps its `.incomplete` file, from which the next download resumes. */
  signal?: AbortSignal
}

/** What `download` reports as it goes. */
export interface DownloadProgress {
  /** The file the bytes are of. */
  file: string
  loadedBytes: number
  /** The revision's bytes to have (null when the API does not list every size). */
  totalBytes: number | null
  fetchedBytes: number
}

/**
 * Download model `id` at `options.revision` (default 'main') from the Hugging Face Hub
 * (`options.endpoint`, HF_ENDPOINT, else https://huggingface.co) into the shared cache, laid
 * out as huggingface_hub lays it out, so that Python, `Model.loadPretrained(id)` and every
 * other reader of the cache find it; resolves to the snapshot directory.
 */
export declare function download(id: string, options?: DownloadOptions): Promise<string>

/** Where `verify` finds the hashes to check against. */
export interface VerifyOptions extends ModelIdOptions, HttpOptions {
  /** Check a plain directory against the hashes the endpoint's API publishes for this model id at `revision`. */
  id?: string
  /** With `id`: only the files matching one of these globs. */
  include?: string | string[]
  /** With `id`: none of the files matching one of these globs. */
  exclude?: string | string[]
}

/**
 * Hash every file (SHA-256 for LFS files, the git blob id for small ones) and compare it with
 * the hash the Hub names it by: a snapshot directory of the cache or a cached model id (each
 * file against the blob it links to), or, with `options.id`, a plain directory (against the
 * endpoint's published hashes). Files are hashed on several threads.
 */
export declare function verify(pathOrId: string, options?: VerifyOptions): Promise<VerifyReport>

/** How `diff` pairs tensors, and where it finds a model id. */
export interface DiffOptions extends CachedModelOptions {
  /** 'auto' (default): by name, or through llama.cpp's name map when one side is a llama.cpp GGUF of the other; 'direct': by name only; 'llama.cpp': through the map. */
  names?: 'auto' | 'direct' | 'llama.cpp'
}

/**
 * Compare two weight sources of any formats the package reads (files, model directories or
 * cached model ids), tensor by tensor and per layer. Streams: one pair of tensors is in memory
 * at a time (small pairs one per thread).
 */
export declare function diff(a: string, b: string, options?: DiffOptions): Promise<DiffReport>
