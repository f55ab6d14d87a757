/* safetensors-node: hand-written declarations shared by the generated bindings below. */

/** The element types of the SafeTensors format (the reference implementation's full list). */
export type DType =
  | 'BOOL' | 'U8' | 'I8' | 'U16' | 'I16' | 'F16' | 'BF16' | 'U32' | 'I32' | 'F32' | 'U64' | 'I64' | 'F64'
  | 'F8_E4M3' | 'F8_E5M2' | 'F8_E8M0' | 'F8_E4M3FNUZ' | 'F8_E5M2FNUZ' | 'F4' | 'F6_E2M3' | 'F6_E3M2' | 'C64'

/**
 * A tensor to write: `dtype` defaults to the dtype of `data` (Float32Array → F32, number[] → F32).
 * A DataView is refused (ERR_INVALID_ARGUMENT): pass a Uint8Array of its bytes.
 */
export interface TensorInput {
  dtype?: DType
  shape: number[]
  data: TypedArray | number[]
}

/** Options of `Model.loadPretrained`. */
export interface LoadPretrainedOptions {
  /** The default form of `getTensor`/`tensors`: `'F32'` upcasts every float type (the MLX-Node behaviour). */
  as?: 'native' | 'F32'
  /**
   * Called as each weight file is opened or parsed (at least once per file). `totalBytes` is
   * null while the total is unknown (the shards of a remote sharded model).
   */
  onProgress?: (p: { file: string; loadedBytes: number; totalBytes: number | null }) => void
}

/** A row-major matrix: an array of rows, or a flat typed array with its dimensions. */
export type Matrix = number[][] | { data: Float32Array | Float64Array; rows: number; cols: number }

/**
 * GGUF quantization: llama-quantize's presets (by its names; Q3_K, Q4_K and Q5_K are its
 * aliases of the _M mixes). Checked against the core's table by crates/core/tests/presets_list.rs.
 */
export type GgufQuantization =
  | 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q6_K' | 'Q5_K_M' | 'Q5_K_S' | 'Q5_1' | 'Q5_0' | 'Q4_K_M' | 'Q4_K_S'
  | 'Q4_1' | 'Q4_0' | 'Q3_K_L' | 'Q3_K_M' | 'Q3_K_S' | 'Q2_K' | 'Q3_K' | 'Q4_K' | 'Q5_K'

export interface ConvertOptions {
  to: 'gguf' | 'onnx' | 'safetensors' | 'mlx'
  /**
   * GGUF only: a llama-quantize preset; each tensor gets the type llama-quantize gives it
   * (llama.cpp tensor names get its mixes, 1-D tensors and norms stay F32, integers are never
   * quantized). Without it every tensor keeps its type (F32, F16, BF16, F64, I8–I64).
   */
  quantization?: GgufQuantization
  /** `fsync` the output before renaming it into place, and its directory after (default false: atomic rename only, like `saveFile`). */
  durable?: boolean
  onProgress?: (p: { doneBytes: number; totalBytes: number }) => void
}

export interface ConvertReport {
  input: string
  output: string
  inputFormat: 'safetensors' | 'sharded-safetensors' | 'model-dir' | 'gguf' | 'mlx'
  outputFormat: 'gguf' | 'onnx' | 'safetensors' | 'mlx'
  tensors: number
  inputBytes: number
  outputBytes: number
  quantization?: string
  /** The llama.cpp architecture a GGUF was written for (`bert`, `llama`, `qwen2`, `qwen3`), when the input was a model directory of one we know. */
  architecture?: string
  /** What you should know about the output, e.g. a model directory of an architecture llama.cpp export does not know (its GGUF holds the tensors under their Hugging Face names). Absent when there is nothing to say. */
  warnings?: string[]
}

export interface FileReport {
  path: string
  /** 'safetensors' | 'sharded-safetensors' | 'gguf' | 'mlx' (a model directory reports the format of its weights, and its config). */
  format: string
  fileSize: number
  files: string[]
  numTensors: number
  numParameters: number
  metadata: Record<string, unknown> | null
  config?: Record<string, unknown>
  /** GGUF tensors report their ggml type name (e.g. 'Q8_0') as dtype. */
  tensors: Array<{ name: string; dtype: string; shape: number[]; byteLength: number; file?: string }>
}

export interface ValidationReport {
  path: string
  format: string | null
  ok: boolean
  /** The first 1,000 problems found. */
  errors: Array<{ code: ErrorCode; message: string; tensor?: string }>
  /** How many more problems there were, not listed. */
  omittedErrors: number
}

/** The stable `code` of every error this package throws or rejects with (README, "Errors"). */
export type ErrorCode =
  | 'ERR_NOT_FOUND'
  | 'ERR_IO'
  | 'ERR_HEADER_TOO_SMALL'
  | 'ERR_HEADER_TOO_LARGE'
  | 'ERR_INVALID_HEADER'
  | 'ERR_INVALID_OFFSETS'
  | 'ERR_SIZE_MISMATCH'
  | 'ERR_INCOMPLETE_FILE'
  | 'ERR_UNSUPPORTED_DTYPE'
  | 'ERR_INVALID_ARGUMENT'
  | 'ERR_NOT_FITTED'
  | 'ERR_UNSAFE_PATH'
  | 'ERR_NO_WEIGHTS'
  | 'ERR_INVALID_MODEL'
  | 'ERR_INVALID_GGUF'
  | 'ERR_INVALID_MLX'
  | 'ERR_UNSAFE_PICKLE'

/** What every failure is: an `Error` with a stable `code`, and the file and tensor concerned where there are ones. */
export interface SafeTensorsError extends Error {
  code: ErrorCode
  /** The file, directory or URL concerned. */
  path?: string
  /** The tensor concerned. */
  tensor?: string
}

/** Options of `SafeTensorsFile.open` / `openAsync`. */
export interface OpenOptions {
  /** 'mmap' (default): a private copy-on-write memory map; 'read': plain reads per tensor (network file systems). */
  backend?: 'mmap' | 'read'
}

export type TypedArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array

/**
 * Which binding artifact the generated loader actually loaded: `'native'` for
 * a native addon, otherwise the `platformArchABI` of the WASI flavor. Every
 * flavor napi-rs can build is listed, because `NAPI_RS_NATIVE_LIBRARY_PATH`
 * can point the loader at a WASI artifact this package does not build itself.
 */
export declare const __napiBindingTarget: 'native' | 'wasm32-wasi' | 'wasm32-wasip1'

/** Ordinary least squares (pivoted QR; the minimum-norm solution when columns are dependent). */
export declare class LinearRegression {
  constructor(options?: { fitIntercept?: boolean })
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
  /**
   * Save as SafeTensors in aprender's layout, with `model_type`, `n_features`, …
   * and the caller's metadata in `__metadata__`.
   */
  saveSafetensors(path: string, options?: SaveOptions | undefined | null): void
  saveSafetensorsAsync(path: string, options?: SaveOptions | undefined | null): Promise<void>
  /** Load a file written by `saveSafetensors` or by aprender. */
  static loadSafetensors(path: string): LinearRegression
  static loadSafetensorsAsync(path: string): Promise<LinearRegression>
  /** Write `config.json` + `weights.safetensors` to `dir` (loadable by `Model.loadPretrained`). */
  save(dir: string, options?: WriteOptions | undefined | null): Promise<void>
  /** Export to GGUF (`quantization` applies to 2-D coefficient matrices). */
  toGguf(path: string, options?: GgufOptions | undefined | null): void
  /** Export to ONNX (IR 8, opset 17), runnable by ONNX Runtime. */
  toOnnx(path: string, options?: WriteOptions | undefined | null): void
}

/**
 * L2-regularised logistic regression (binary: sigmoid; 3+ classes: multinomial softmax),
 * the objective of scikit-learn's `LogisticRegression(C=…)`, solved by Newton's method.
 */
export declare class LogisticRegression {
  /**
   * `c`: inverse L2 strength (default 1.0); `maxIter`: Newton iterations (default 100);
   * `tol`: default 1e-4.
   */
  constructor(options?: { fitIntercept?: boolean; c?: number; maxIter?: number; tol?: number })
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
  /**
   * Save as SafeTensors in aprender's layout, with `model_type`, `n_features`, …
   * and the caller's metadata in `__metadata__`.
   */
  saveSafetensors(path: string, options?: SaveOptions | undefined | null): void
  saveSafetensorsAsync(path: string, options?: SaveOptions | undefined | null): Promise<void>
  /** Load a file written by `saveSafetensors` or by aprender. */
  static loadSafetensors(path: string): LogisticRegression
  static loadSafetensorsAsync(path: string): Promise<LogisticRegression>
  /** Write `config.json` + `weights.safetensors` to `dir` (loadable by `Model.loadPretrained`). */
  save(dir: string, options?: WriteOptions | undefined | null): Promise<void>
  /** Export to GGUF (`quantization` applies to 2-D coefficient matrices). */
  toGguf(path: string, options?: GgufOptions | undefined | null): void
  /** Export to ONNX (IR 8, opset 17), runnable by ONNX Runtime. */
  toOnnx(path: string, options?: WriteOptions | undefined | null): void
}

/**
 * A pretrained model directory: `config.json` plus weights (`weights.safetensors`,
 * `model.safetensors`, a sharded `model.safetensors.index.json`, or `weights.mlx`).
 */
export declare class Model {
  /** Instances come from `Model.loadPretrained` / `loadPretrainedSync` (factories bypass this). */
  constructor()
  /** `loadPretrained` on the calling thread. */
  static loadPretrainedSync(dir: string, options?: LoadPretrainedOptions): Model
  get dir(): string
  /** config.json, parsed (keys as written). */
  get config(): Record<string, unknown>
  get format(): 'safetensors' | 'sharded-safetensors' | 'mlx'
  /** Weight files used, relative to `dir`. */
  get files(): Array<string>
  get tensorNames(): Array<string>
  get numParameters(): number
  has(name: string): boolean
  getTensor(name: string, options?: GetOptions | undefined | null): Tensor
  getTensorAsync(name: string, options?: GetOptions | undefined | null): Promise<Tensor>
  tensors(options?: GetOptions | undefined | null): Record<string, Tensor>
  /** Write config.json and the weights to `dir` (atomically per file). */
  save(dir: string, options?: ModelSaveOptions | undefined | null): Promise<void>
  /**
   * Predictions of a directory saved by `LinearRegression`/`LogisticRegression.save`
   * (config.json `model_type`): linear → one value per row; logistic → class
   * probabilities, rows × classes. Other models: ERR_INVALID_MODEL.
   */
  predict(x: Matrix): Float32Array
}

/**
 * A SafeTensors file, validated at open and read lazily. Tensors come back as typed arrays
 * that view the (private, copy-on-write) mapping when aligned, and copies otherwise.
 */
export declare class SafeTensorsFile {
  /** Instances come from `open`, `openAsync` and `fromBytes` (factories bypass this). */
  constructor()
  /** Open and validate a file. `backend: 'read'` uses plain reads instead of a memory map. */
  static open(path: string, options?: OpenOptions): SafeTensorsFile
  /** `open` off the event loop. */
  static openAsync(path: string, options?: OpenOptions): Promise<SafeTensorsFile>
  /** Validate a whole file held in memory (the bytes are copied). */
  static fromBytes(bytes: Uint8Array): SafeTensorsFile
  get path(): string | null
  /** The `__metadata__` map, or null. */
  get metadata(): Record<string, string> | null
  /** Tensor names in data-offset order. */
  get tensorNames(): Array<string>
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
  getTensor(name: string, options?: GetOptions | undefined | null): Tensor
  getTensorAsync(name: string, options?: GetOptions | undefined | null): Promise<Tensor>
  /**
   * A sub-tensor along the leading dimensions: per dimension `[start, stop)`, an index
   * (which drops the dimension), or null for all of it. Negative values count from the end.
   */
  getSlice(name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions): Tensor
  /** Every tensor, keyed by name in data-offset order. */
  tensors(options?: GetOptions | undefined | null): Record<string, Tensor>
  tensorsAsync(options?: GetOptions | undefined | null): Promise<Record<string, Tensor>>
  /** `getSlice` off the event loop. */
  getSliceAsync(name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions): Promise<Tensor>
}

/**
 * Convert a SafeTensors file, sharded index, model directory, GGUF file or weights.mlx to
 * `options.to` (ONNX takes a linear/logistic regression model). Streams tensor by tensor.
 */
export declare function convert(input: string, output: string, options: ConvertOptions): Promise<ConvertReport>

export interface ConvertProgress {
  doneBytes: number
  totalBytes: number
}

/** Decode a tensor's stored bytes (fetched separately) into the form `options` asks for. */
export declare function decodeTensor(name: string, dtype: DType, shape: number[], bytes: Uint8Array, options?: GetOptions): Tensor

export interface GetOptions {
  as?: 'native' | 'F32' | 'F64' | 'raw'
  copy?: boolean
}

export interface GgufOptions {
  /**
   * The type of 2-D coefficient matrices: a llama-quantize preset's main type (Q4_K_M →
   * Q4_K); 1-D vectors stay F32 unless F16 or BF16 is asked. Default F32.
   */
  quantization?: GgufQuantization
  /** `fsync` the file before renaming it into place, and its directory after (default false). */
  durable?: boolean
}

/**
 * `inspect`'s report as JSON text (index.js parses it: napi's object conversion caps the
 * number of values, and a file may list hundreds of thousands of tensors).
 */
export declare function inspectJson(path: string): Promise<string>

/** Open a file and read every tensor. */
export declare function loadFile(path: string, options?: GetOptions | undefined | null): Record<string, Tensor>

export declare function loadFileAsync(path: string, options?: GetOptions | undefined | null): Promise<Record<string, Tensor>>

/**
 * Load a local model directory off the event loop (index.js's `Model.loadPretrained` calls
 * this for paths; URLs go to lib/remote.js). Internal: not exported by the package entry.
 */
export declare function loadModelDir(dir: string, options?: LoadPretrainedOptions): Promise<Model>

/** The SafeTensors bytes of a weights.mlx document (used for remote MLX directories). */
export declare function mlxToSafetensors(bytes: Uint8Array): Buffer

export interface ModelSaveOptions {
  format?: 'safetensors' | 'mlx'
  maxShardBytes?: number
  /**
   * fsync each file before its rename, and the directory after (default false: atomic
   * renames only, as `saveFile`).
   */
  durable?: boolean
}

export interface ProgressEvent {
  /** The weight file, relative to the model directory. */
  file: string
  loadedBytes: number
  totalBytes: number
}

/**
 * Validate a file from its first bytes (8-byte prefix + whole JSON header) and total length;
 * its data stays elsewhere (tensors come from `decodeTensor` of fetched bytes). Used by
 * `openUrl`; internal, like the other free functions here (not exported by the package entry).
 */
export declare function safetensorsFromHeader(head: Uint8Array, fileLength: number, origin: string): SafeTensorsFile

/** Write tensors to a SafeTensors file, atomically. */
export declare function saveFile(path: string, tensors: Record<string, TensorInput>, options?: SaveOptions): void

/**
 * `saveFile` off the event loop (the tensor data is copied first, into one buffer, before
 * this returns, so the caller may reuse, resize or detach its arrays at once).
 */
export declare function saveFileAsync(path: string, tensors: Record<string, TensorInput>, options?: SaveOptions): Promise<void>

export interface SaveOptions {
  metadata?: Record<string, string>
  /**
   * `saveFile` / `saveFileAsync` / `saveSafetensors`: `fsync` the new file before renaming it into place, and
   * its directory after, so that it survives a power cut once the call returns (default
   * false). Without it the write is still atomic — a crashed or killed process leaves the
   * complete old or new file — but a power cut may leave the old file, the new one, or an
   * empty file, as with `fs.writeFileSync`.
   */
  durable?: boolean
}

/** The bytes of a SafeTensors file holding `tensors`. */
export declare function serialize(tensors: Record<string, TensorInput>, options?: { metadata?: Record<string, string> }): Buffer

export interface SliceSpans {
  shape: Array<number>
  /** Absolute `[offset, length]` byte spans within the file, in output order. */
  spans: Array<[number, number]>
}

export interface Tensor {
  name: string
  dtype: DType
  shape: Array<number>
  data: TypedArray
}

/** Absolute byte range `[start, end)` of a tensor within the file. */
export declare function tensorFileRange(file: SafeTensorsFile, name: string): [number, number]

export interface TensorInfo {
  name: string
  dtype: DType
  shape: Array<number>
  dataOffsets: [number, number]
  byteLength: number
  numel: number
}

/** The absolute byte spans a `getSlice` would read, and the result's shape. */
export declare function tensorSliceSpans(file: SafeTensorsFile, name: string, ranges: Array<[number, number] | number | null>): SliceSpans

/** Every problem found in a file or directory (not only the first), with codes. */
export declare function validate(path: string): Promise<ValidationReport>

/** Options of a model's `save` and `toOnnx`. */
export interface WriteOptions {
  /**
   * `fsync` each file before renaming it into place, and its directory after, so that it
   * survives a power cut once the call returns (default false; the write is atomic either way).
   */
  durable?: boolean
}
