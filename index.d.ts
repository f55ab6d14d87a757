// safetensors-node: the public API's types. The generated binding.d.ts declares the native
// module, internal calls included; this file declares exactly what index.js exports
// (__test__/exports.spec.ts checks the two against each other) and types its results by
// their options (`getTensor(name, { as: 'F32' })` is a `Tensor<Float32Array>`).
// index.d.mts gives ES modules the same declarations.
import type {
  ConvertOptions,
  ConvertReport,
  DType,
  FileReport,
  GgufOptions,
  LoadPretrainedOptions,
  Matrix,
  ModelSaveOptions,
  OpenOptions,
  SaveOptions,
  TensorInfo,
  TensorInput,
  TypedArray,
  ValidationReport,
  WriteOptions,
} from './binding'

export type {
  ConvertOptions,
  ConvertProgress,
  ConvertReport,
  DType,
  ErrorCode,
  FileReport,
  GgufOptions,
  LoadPretrainedOptions,
  Matrix,
  ModelSaveOptions,
  OpenOptions,
  SafeTensorsError,
  SaveOptions,
  TensorInfo,
  TensorInput,
  TypedArray,
  ValidationReport,
  WriteOptions,
} from './binding'

/** The forms `getTensor` and its relatives return: the stored type's own array, or a conversion. */
export type TensorAs = 'native' | 'F32' | 'F64' | 'raw'

export interface GetOptions<A extends TensorAs = TensorAs> {
  /** 'native' (default): the stored type's array; 'F32' / 'F64': converted floats; 'raw': the stored bytes. */
  as?: A
  /** Always return an owned copy, never a view of the mapping. */
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
 * A SafeTensors file, validated at open and read lazily. Tensors come back as typed arrays
 * that view the (private, copy-on-write) mapping when aligned, and copies otherwise.
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
  info(name: string): TensorInfo
  getTensor<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getTensorAsync<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  /** A sub-tensor along the leading dimensions; negative values count from the end. */
  getSlice<A extends TensorAs = 'native'>(name: string, ranges: SliceRange[], options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getSliceAsync<A extends TensorAs = 'native'>(name: string, ranges: SliceRange[], options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  /** Every tensor, keyed by name in data-offset order. */
  tensors<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Record<string, Tensor<TensorData<A>>>
  tensorsAsync<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Promise<Record<string, Tensor<TensorData<A>>>>
}

/**
 * A pretrained model directory: `config.json` plus weights (`weights.safetensors`,
 * `model.safetensors`, a sharded `model.safetensors.index.json`, or `weights.mlx`).
 */
export declare class Model {
  /** Instances come from `loadPretrained` and `loadPretrainedSync` (`new` throws ERR_INVALID_ARGUMENT). */
  private constructor()
  /** Load a model directory: a local path, or an http(s):// URL (fetched lazily). */
  static loadPretrained(dir: `http://${string}` | `https://${string}`, options?: LoadPretrainedOptions & OpenUrlOptions): Promise<RemoteModel>
  static loadPretrained(dir: string, options?: LoadPretrainedOptions): Promise<Model>
  static loadPretrained(dir: string, options?: LoadPretrainedOptions & OpenUrlOptions): Promise<Model | RemoteModel>
  /** `loadPretrained` of a local directory, on the calling thread. */
  static loadPretrainedSync(dir: string, options?: LoadPretrainedOptions): Model
  get dir(): string
  /** config.json, parsed (keys as written). */
  get config(): Record<string, unknown>
  get format(): 'safetensors' | 'sharded-safetensors' | 'mlx'
  /** Weight files used, relative to `dir`. */
  get files(): string[]
  get tensorNames(): string[]
  get numParameters(): number
  has(name: string): boolean
  getTensor<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getTensorAsync<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  tensors<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Record<string, Tensor<TensorData<A>>>
  /** Write config.json and the weights to `dir` (atomically per file). */
  save(dir: string, options?: ModelSaveOptions | null): Promise<void>
  /**
   * Predictions of a directory saved by `LinearRegression`/`LogisticRegression.save`
   * (config.json `model_type`): linear → one value per row; logistic → class
   * probabilities, rows × classes. Other models: ERR_INVALID_MODEL.
   */
  predict(x: Matrix): Float32Array
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
 * Convert a SafeTensors file, sharded index, model directory, GGUF file or weights.mlx to
 * `options.to` (ONNX takes a linear/logistic regression model). Streams tensor by tensor.
 */
export declare function convert(input: string, output: string, options: ConvertOptions): Promise<ConvertReport>
/** Describe a SafeTensors file, sharded index, GGUF file, weights.mlx or model directory. */
export declare function inspect(path: string): Promise<FileReport>
/** Every problem found in a file or directory (not only the first), with codes. */
export declare function validate(path: string): Promise<ValidationReport>

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
  /** Called after each request with the bytes transferred so far; `totalBytes` is null while unknown. */
  onProgress?: (p: { loadedBytes: number; totalBytes: number | null }) => void
}

/** A SafeTensors file behind a URL (from `SafeTensorsFile.openUrl`): its header is validated at open, tensors fetched on demand. */
export interface RemoteSafeTensorsFile {
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
  getTensor<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getTensorAsync<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  getSlice<A extends TensorAs = 'native'>(name: string, ranges: SliceRange[], options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getSliceAsync<A extends TensorAs = 'native'>(name: string, ranges: SliceRange[], options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  tensors<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Record<string, Tensor<TensorData<A>>>
  tensorsAsync<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Promise<Record<string, Tensor<TensorData<A>>>>
}

/** A model directory behind a URL (from `Model.loadPretrained(url)`; same discovery order and path rules as a local one). */
export interface RemoteModel {
  readonly dir: string
  readonly config: Record<string, unknown>
  readonly format: 'safetensors' | 'sharded-safetensors' | 'mlx'
  readonly files: string[]
  readonly tensorNames: string[]
  readonly numParameters: number
  readonly bytesFetched: number
  has(name: string): boolean
  getTensor<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Tensor<TensorData<A>>
  getTensorAsync<A extends TensorAs = 'native'>(name: string, options?: GetOptions<A> | null): Promise<Tensor<TensorData<A>>>
  tensors<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Record<string, Tensor<TensorData<A>>>
  tensorsAsync<A extends TensorAs = 'native'>(options?: GetOptions<A> | null): Promise<Record<string, Tensor<TensorData<A>>>>
}
