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
  /**
   * The input is a PEFT LoRA adapter directory (`adapter_config.json` + `adapter_model.safetensors`)
   * and this is its base model's directory: the output (`to: 'gguf'`) is a llama.cpp GGUF LoRA, as
   * `convert_lora_to_gguf.py` writes it. `quantization` is then 'F32', 'F16', 'BF16' or 'Q8_0'
   * (without it the adapter's float types are kept).
   */
  base?: string
  /**
   * A PEFT LoRA adapter directory merged into the input model directory: the output holds the
   * weights PEFT's `merge_and_unload()` gives (a model directory for 'safetensors').
   */
  lora?: string
  /** With `lora`: a multiplier of the adapter's scaling (`lora_alpha / r`); default 1. */
  loraScale?: number
  /** `fsync` the output before renaming it into place, and its directory after (default false: atomic rename only, like `saveFile`). */
  durable?: boolean
  onProgress?: (p: { doneBytes: number; totalBytes: number }) => void
  /**
   * Keys to set in the output's metadata, or to remove (`null`); every other key is kept as the
   * conversion writes it. GGUF types follow gguf-py's: string → STRING, boolean → BOOL, integer
   * → INT32 (INT64 beyond it), other numbers → FLOAT32, bigint → INT64 (UINT64 beyond it), array
   * → ARRAY of its elements' type, typed array → ARRAY of its element type; `{ type: 'UINT32',
   * value }` chooses the type (for an array, its elements'). SafeTensors and MLX metadata hold
   * the value's text. `split.*` keys are refused (see `maxShardBytes`), and so is removing
   * `general.architecture`. Not for ONNX.
   */
  metadata?: Record<string, MetadataEditValue | null>
  /**
   * GGUF only: write a split set as `llama-gguf-split --split-max-size` does, each file's tensor
   * data at most this many bytes (a tensor larger than that gets a file of its own): `out.gguf`
   * becomes `out-00001-of-0000N.gguf` … beside it, listed in the report's `files`.
   */
  maxShardBytes?: number
}

/** A value of `ConvertOptions.metadata`. */
export type MetadataEditValue =
  | string
  | number
  | bigint
  | boolean
  | (string | number | bigint | boolean)[]
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array
  | { type: GgufValueTypeName; value: number | bigint | string | boolean | (number | bigint | string | boolean)[] }

/** GGUF's scalar value types, by the spec's names. */
export type GgufValueTypeName = 'UINT8' | 'INT8' | 'UINT16' | 'INT16' | 'UINT32' | 'INT32' | 'UINT64' | 'INT64' | 'FLOAT32' | 'FLOAT64' | 'BOOL' | 'STRING'

export interface ConvertReport {
  input: string
  output: string
  inputFormat: WeightsFormat | 'model-dir' | 'lora-adapter'
  outputFormat: 'gguf' | 'onnx' | 'safetensors' | 'mlx'
  tensors: number
  inputBytes: number
  outputBytes: number
  quantization?: string
  /** The llama.cpp architecture a GGUF was written for (`bert`, `llama`, `qwen2`, `qwen3`), when the input was a model directory of one we know. */
  architecture?: string
  /** What you should know about the output, e.g. a model directory of an architecture llama.cpp export does not know (its GGUF holds the tensors under their Hugging Face names), or a file of the directory left out because it may not be read (it resolves outside the directory, or is not a regular file). Absent when there is nothing to say. */
  warnings?: string[]
  /** Tensors not written because another name holds the same bytes (a PyTorch checkpoint's tied weights, written once as Hugging Face's convert.py does; each is named in the file's `__metadata__` as `name: keptAs`). Absent when none. */
  dropped?: { name: string; keptAs: string }[]
  /** The files written, relative to `output`, when the output is a directory (a PyTorch model directory or sharded index converted to SafeTensors); for a split GGUF (`maxShardBytes`), the names of its files, beside where `output` would be. */
  files?: string[]
}

export interface FileReport {
  path: string
  /** A model directory reports the format of its weights, and its config. */
  format: WeightsFormat
  fileSize: number
  files: string[]
  numTensors: number
  numParameters: number
  metadata: Record<string, unknown> | null
  config?: Record<string, unknown>
  /** `dtype` is the stored type as the format names it (GGUF: the ggml type, e.g. 'Q8_0'); `byteLength` the bytes stored. */
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

/** One file `verify` checked. */
export interface VerifiedFile {
  /** Its path in the directory, `/`-separated. */
  file: string
  ok: boolean
  /** The hash that names it (the blob it links to; the Hub's published hash); null when nothing names one. */
  expected: string | null
  /** The hash of its bytes; null when it could not be read. */
  actual: string | null
  /** SHA-256 (LFS files) or the git blob id (small files); null when nothing names a hash. */
  algorithm: 'sha256' | 'git-sha1' | null
  /** Its size (0 when it could not be read). */
  bytes: number
  /** Why it could not be checked (`CODE: message`): missing, unreadable, not a link into the cache's `blobs/`. */
  error?: string
}

/** What `verify` found: every file, in path order. */
export interface VerifyReport {
  dir: string
  /** Every file matched its hash. */
  ok: boolean
  files: VerifiedFile[]
}

/**
 * One tensor as `diff` compares it. The figures are over each side's values as F32 (as
 * `getTensor(name, { as: 'F32' })` reads them), computed in float64; null when the shapes
 * differ, the pair is one-sided, or the figure is undefined or NaN.
 */
export interface TensorDiff {
  /** Its name in A (in B when only B has it). */
  name: string
  /** Its name in B, when the name map pairs it under another name. */
  nameB?: string
  status: 'common' | 'only-a' | 'only-b'
  /** Its name up to the first number (`model.layers.3`, `blk.3`); null outside the layers. */
  layer: string | null
  shapeA: number[] | null
  shapeB: number[] | null
  /** The stored type (`BF16`, `Q4_K`, …). */
  dtypeA: string | null
  dtypeB: string | null
  shapeChanged: boolean
  dtypeChanged: boolean
  /** Every value the same, bit for bit. */
  identical: boolean | null
  numel: number | null
  /** max |a − b| */
  maxAbs: number | null
  /** Σ|a − b| / n */
  meanAbs: number | null
  /** ‖a − b‖ / ‖a‖ (0 when both are all zeros) */
  relError: number | null
  /** a·b / (‖a‖ ‖b‖) */
  cosine: number | null
  /** Why a pair of one shape was not compared (`CODE: message`: a type without an F32 form). */
  error?: string
}

/** Totals of `diff` over a layer, or over everything. */
export interface DiffTotals {
  /** Tensors in both with one shape, compared. */
  compared: number
  onlyA: number
  onlyB: number
  shapeChanged: number
  dtypeChanged: number
  /** Compared tensors that are bit-identical. */
  identical: number
  /** Elements compared. */
  numel: number
  maxAbs: number | null
  /** Σ|Δ| / Σn over the compared tensors. */
  meanAbs: number | null
  /** sqrt(Σ‖Δ‖²) / sqrt(Σ‖a‖²) over the compared tensors. */
  relError: number | null
  /** The lowest cosine similarity of a compared tensor. */
  minCosine: number | null
}

/** A layer's totals. */
export interface LayerDiff extends DiffTotals {
  /** The name prefix up to the layer number; null for the tensors outside the layers. */
  layer: string | null
}

/** What `diff` found. */
export interface DiffReport {
  a: string
  b: string
  formatA: WeightsFormat
  formatB: WeightsFormat
  /** How tensors were paired: by name, or through llama.cpp's converter's name map. */
  nameMap: 'direct' | 'llama.cpp'
  /** A's tensors in A's order, then those only in B. */
  tensors: TensorDiff[]
  /** In the order of their first tensor; the tensors outside the layers last. */
  layers: LayerDiff[]
  summary: DiffTotals
  /** Things to know (a name map that could not be made, …). */
  warnings: string[]
}

/** The stable `code` of every error this package throws or rejects with (docs/api.md, "Errors"). */
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
  | 'ERR_UNKNOWN_FORMAT'
  | 'ERR_INTERNAL'
  | 'ERR_CLOSED'
  | 'ERR_HASH_MISMATCH'
  | 'ERR_ABORTED'

/** What every failure is: an `Error` with a stable `code`, and the file and tensor concerned where there are ones. */
export interface SafeTensorsError extends Error {
  code: ErrorCode
  /** The file, directory or URL concerned. */
  path?: string
  /** The tensor concerned. */
  tensor?: string
}

/** The formats `openWeights` reads. */
export type WeightsFormat = 'safetensors' | 'sharded-safetensors' | 'gguf' | 'pytorch' | 'numpy' | 'mlx'

/** Options of `openWeights` / `openWeightsSync`. */
export interface OpenWeightsOptions {
  /** Read the input as this format instead of recognising it by its bytes. */
  format?: WeightsFormat
  /** 'mmap' (default) or 'read': plain reads (SafeTensors: per tensor; GGUF, PyTorch, NumPy: the whole file, once; larger than memory: ERR_IO). */
  backend?: 'mmap' | 'read'
}

/** Options of `SafeTensorsFile.open` / `openAsync`. */
export interface OpenOptions {
  /** 'mmap' (default): a private copy-on-write memory map; 'read': plain reads per tensor (network file systems). */
  backend?: 'mmap' | 'read'
}

/**
 * A GGUF metadata value: UINT8…INT32, FLOAT32 and FLOAT64 as numbers, UINT64/INT64 as bigint,
 * BOOL as boolean, STRING as string; an array of numbers as the typed array of its element
 * type (ARRAY[FLOAT32] → Float32Array, ARRAY[UINT64] → BigUint64Array, …), an array of
 * strings or booleans as a JS array.
 */
export type GgufValue =
  | number
  | bigint
  | string
  | boolean
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array
  | BigUint64Array
  | BigInt64Array
  | string[]
  | boolean[]

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

/** A GGUF file (llama.cpp, ggml), validated at open and read lazily. */
export declare class GgufFile {
  /** Tensor names, in the order the reader serves them. */
  get tensorNames(): Array<string>
  get numParameters(): number
  has(name: string): boolean
  getTensor(name: string, options?: GetOptions | undefined | null): Tensor
  getTensorAsync(name: string, options?: GetOptions | undefined | null): Promise<Tensor>
  /** Every tensor, keyed by name in `tensorNames` order. */
  tensors(options?: GetOptions | undefined | null): Record<string, Tensor>
  tensorsAsync(options?: GetOptions | undefined | null): Promise<Record<string, Tensor>>
  /** Instances come from the factories (they bypass this). */
  constructor()
  /**
   * Open and validate the file. `backend: 'read'` uses plain reads instead of a
   * memory map.
   */
  static open(path: string, options?: OpenOptions): GgufFile
  /** `open` off the event loop. */
  static openAsync(path: string, options?: OpenOptions): Promise<GgufFile>
  get format(): 'gguf'
  /** The file opened (the URL for `openUrl`). */
  get path(): string | null
  /** The GGUF version of the file (2 or 3). */
  get version(): number
  /** The alignment of the data section and of each tensor (`general.alignment`, default 32). */
  get alignment(): number
  /** Offset of the data section from the start of the file. */
  get dataOffset(): number
  /** Every key/value in file order, typed: see `GgufValue`. The same object at every read. */
  get metadata(): Record<string, GgufValue>
  /** Each key's GGUF type: 'UINT32', 'STRING', … and 'ARRAY[FLOAT32]' for arrays. */
  get metadataTypes(): Record<string, string>
  /** Always null (model directories have one). */
  get config(): null
  /** Size of the whole file in bytes. */
  get byteLength(): number
  info(name: string): TensorInfo & { dataOffsets: [number, number]; ggmlType: string; offset: number }
  /** Release the file now (see `SafeTensorsFile.close`). A second call does nothing. */
  close(): void
}

/** A blob being downloaded (see `HubRepo.openBlobAsync`). */
export declare class HubBlob {
  /** Instances come from `HubRepo.openBlobAsync`. */
  constructor()
  /** Bytes its `.incomplete` file already held: the download goes on from there. */
  get resumedBytes(): number
  /** Append `bytes` (copied at once) to the file and the hash, off the event loop. */
  writeAsync(bytes: Uint8Array): Promise<void>
  /**
   * Check the blob against its name and rename it into place: its path. A wrong hash is
   * ERR_HASH_MISMATCH and nothing lands.
   */
  finishAsync(): Promise<string>
  /** Stop without finishing: the lock goes, the `.incomplete` file stays (to resume). */
  release(): void
}

/** One model's folder of the Hugging Face cache, written as huggingface_hub writes it. */
export declare class HubRepo {
  /** Instances come from `HubRepo.open`. */
  constructor()
  /** Model `id` (checked) in the cache `cacheDir` names, else the one `vars` name. */
  static open(id: string, cacheDir: string | undefined | null, vars: Record<string, string>): HubRepo
  /** `<cache>/models--org--name`. */
  get dir(): string
  /** Whether blob `etag` is there (of `size` bytes, when known). */
  hasBlob(etag: string, size?: number | undefined | null): boolean
  /** Point `snapshots/<commit>/<path>` at blob `etag`; the link's path. */
  link(commit: string, path: string, etag: string): string
  /** `refs/<revision>` ← `commit`. */
  writeRef(revision: string, commit: string): void
  /** `snapshots/<commit>`. */
  snapshotDir(commit: string): string
  /** The commit `revision` names in the cache, when its snapshot directory exists. */
  cachedCommit(revision: string): string | null
  /**
   * Start or resume blob `etag` of `size` bytes (what its `.incomplete` file holds is
   * hashed again first, off the event loop); null while another download holds its lock.
   */
  openBlobAsync(etag: string, size: number): Promise<HubBlob | null>
}

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
  /** Tensor names, in the order the reader serves them. */
  get tensorNames(): Array<string>
  get numParameters(): number
  has(name: string): boolean
  getTensor(name: string, options?: GetOptions | undefined | null): Tensor
  getTensorAsync(name: string, options?: GetOptions | undefined | null): Promise<Tensor>
  /** Every tensor, keyed by name in `tensorNames` order. */
  tensors(options?: GetOptions | undefined | null): Record<string, Tensor>
  tensorsAsync(options?: GetOptions | undefined | null): Promise<Record<string, Tensor>>
  /**
   * A sub-tensor along the leading dimensions: per dimension `[start, stop)`, an
   * index (which drops the dimension), or null for all of it. Negative values
   * count from the end.
   */
  getSlice(name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions): Tensor
  /** `getSlice` off the event loop. */
  getSliceAsync(name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions): Promise<Tensor>
  /** Instances come from `Model.loadPretrained` / `loadPretrainedSync` (factories bypass this). */
  constructor()
  /** `loadPretrained` on the calling thread. */
  static loadPretrainedSync(dir: string, options?: LoadPretrainedOptions): Model
  get dir(): string
  /** config.json, parsed (keys as written). */
  get config(): Record<string, unknown>
  /** The format of the weights (each weight file is recognised by its bytes). */
  get format(): WeightsFormat
  /** Weight files used, relative to `dir`. */
  get files(): Array<string>
  /** The directory (as `dir`). */
  get path(): string
  /** The weights' key/values (a SafeTensors `__metadata__`, …), or null. */
  get metadata(): Record<string, unknown> | null
  info(name: string): TensorInfo
  /**
   * Release the weights now (see `SafeTensorsFile.close`); a `save` already started
   * finishes. A second call does nothing.
   */
  close(): void
  /**
   * Write the model to `dir` as transformers' `save_pretrained` lays it out: config.json,
   * `model.safetensors` (or shards and their index), the tokenizer and generation files of
   * the model's own directory. The directory is replaced whole: built beside it, then
   * swapped in (what else it held is kept, weight files of other layouts excepted).
   */
  save(dir: string, options?: ModelSaveOptions | undefined | null): Promise<SaveReport>
  /**
   * Predictions of a directory saved by `LinearRegression`/`LogisticRegression.save`
   * (config.json `model_type`), as that class's `predict` gives them: linear → one value
   * per row (Float32Array); logistic → one class label per row (Int32Array). Other
   * models: ERR_INVALID_MODEL.
   */
  predict(x: Matrix): Float32Array | Int32Array
  /**
   * Class probabilities of a classifier directory (`LogisticRegression.save`): rows ×
   * classes, row-major, columns in the order of config.json's `classes`. A regression
   * model has none: ERR_INVALID_ARGUMENT.
   */
  predictProba(x: Matrix): Float32Array
}

/**
 * Opens a file or model directory by the byte ranges a driver fetches. Internal
 * (lib/remote.js).
 */
export declare class RemoteOpener {
  /**
   * `kind`: 'file' (a single file), 'any' (a file, else the directory of that name),
   * 'directory', or 'model' (a directory, or a `.gguf` file as a model).
   */
  static create(url: string, kind: 'file' | 'any' | 'directory' | 'model', format?: WeightsFormat | null): RemoteOpener
  /** The requests to make next, or the open file. */
  step(): RemoteRequest[] | RemoteWeights
  /**
   * Answer request `id` with its bytes (`total`: the file's length the reply said, if it
   * did); `bytes` null: the file does not exist.
   */
  reply(id: number, bytes: Uint8Array | null, total?: number | null): void
  /** Read the rest of the directory under `base` (a URL ending in '/'). */
  rebase(base: string): void
}

/**
 * An open remote file or model directory: its listing, and its tensors served from bytes
 * the driver fetches. Internal (lib/remote.js wraps it).
 */
export declare class RemoteWeights {
  get format(): WeightsFormat
  /** The URL opened. */
  get path(): string
  /** A directory's URL (ending in '/'), or null for a file. */
  get base(): string | null
  get config(): Record<string, unknown> | null
  /** A directory's weight files, relative to it. */
  get files(): Array<string>
  get metadata(): Record<string, string> | null
  get tensorNames(): Array<string>
  get numParameters(): number
  get byteLength(): number
  has(name: string): boolean
  info(name: string): TensorInfo
  /**
   * The header of a GGUF file read by ranges, as a `GgufFile` (its tensors are served
   * here), or null.
   */
  gguf(): GgufFile | null
  /**
   * The companion files of a directory (each fetched whole, at most `cap` bytes, and
   * skipped where missing).
   */
  companions(): Array<Companion>
  /** Where the stored bytes of `name` lie, or null when its file is held whole. */
  spans(name: string): Array<RemoteSpan> | null
  /** The spans a slice needs and its shape, or null when the file is held whole. */
  sliceSpans(name: string, ranges: Array<[number, number] | number | null>): RemoteSlice | null
  /** The tensor, from the bytes of its spans concatenated (null: its file is held). */
  serve(name: string, bytes: Uint8Array | null, options?: GetOptions | null): Tensor
  /** A slice, from the bytes of its spans concatenated (null: its file is held). */
  serveSlice(name: string, ranges: Array<[number, number] | number | null>, bytes: Uint8Array | null, options?: GetOptions | null): Tensor
  /** Release the listing now (later calls throw ERR_CLOSED). */
  close(): void
}

/**
 * A SafeTensors file, validated at open and read lazily. Tensors come back as typed arrays
 * that view the (private, copy-on-write) mapping when aligned, and copies otherwise.
 */
export declare class SafeTensorsFile {
  /** Tensor names, in the order the reader serves them. */
  get tensorNames(): Array<string>
  get numParameters(): number
  has(name: string): boolean
  getTensor(name: string, options?: GetOptions | undefined | null): Tensor
  getTensorAsync(name: string, options?: GetOptions | undefined | null): Promise<Tensor>
  /** Every tensor, keyed by name in `tensorNames` order. */
  tensors(options?: GetOptions | undefined | null): Record<string, Tensor>
  tensorsAsync(options?: GetOptions | undefined | null): Promise<Record<string, Tensor>>
  /**
   * A sub-tensor along the leading dimensions: per dimension `[start, stop)`, an
   * index (which drops the dimension), or null for all of it. Negative values
   * count from the end.
   */
  getSlice(name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions): Tensor
  /** `getSlice` off the event loop. */
  getSliceAsync(name: string, ranges: Array<[number, number] | number | null>, options?: GetOptions): Promise<Tensor>
  /** Instances come from the factories (they bypass this). */
  constructor()
  /**
   * Open and validate the file. `backend: 'read'` uses plain reads instead of a
   * memory map.
   */
  static open(path: string, options?: OpenOptions): SafeTensorsFile
  /** `open` off the event loop. */
  static openAsync(path: string, options?: OpenOptions): Promise<SafeTensorsFile>
  /** Validate a whole file held in memory (the bytes are copied). */
  static fromBytes(bytes: Uint8Array): SafeTensorsFile
  get path(): string | null
  /** The `__metadata__` map, or null. */
  get metadata(): Record<string, string> | null
  /** Size of the whole file in bytes. */
  get byteLength(): number
  /**
   * Release the file now: later calls throw ERR_CLOSED, and the mapping goes as soon as
   * no array handed out before views it (those stay valid). A second call does nothing.
   */
  close(): void
  /**
   * Whether the file on disk changed since it was opened (one `stat`): removed
   * (ERR_NOT_FOUND), replaced (ERR_IO; this object keeps reading the file it opened),
   * modified in place (ERR_IO), or resized in place (ERR_INCOMPLETE_FILE: reading a
   * memory map past the new end would fault). Always ok for `fromBytes`.
   */
  validate(): ValidationReport
  /** Every SafeTensors tensor has its `dataOffsets`. */
  info(name: string): TensorInfo & { dataOffsets: [number, number] }
}

/**
 * A weights file of any format this package reads (SafeTensors, a sharded index, a model
 * directory, GGUF, weights.mlx), detected by its bytes. Tensors come back as typed arrays
 * that view the file's mapping where the bytes allow, copies otherwise.
 */
export declare class WeightsFile {
  /** Tensor names, in the order the reader serves them. */
  get tensorNames(): Array<string>
  get numParameters(): number
  has(name: string): boolean
  getTensor(name: string, options?: GetOptions | undefined | null): Tensor
  getTensorAsync(name: string, options?: GetOptions | undefined | null): Promise<Tensor>
  /** Every tensor, keyed by name in `tensorNames` order. */
  tensors(options?: GetOptions | undefined | null): Record<string, Tensor>
  tensorsAsync(options?: GetOptions | undefined | null): Promise<Record<string, Tensor>>
  /** Instances come from `openWeights` and `openWeightsSync`. */
  constructor()
  get format(): WeightsFormat
  /** The file or directory opened (a URL for remote files), or null for bytes. */
  get path(): string | null
  /** The format's key/values (SafeTensors `__metadata__`, GGUF's pairs, …), or null. */
  get metadata(): Record<string, unknown> | null
  /** `config.json` of a model directory, or null. */
  get config(): Record<string, unknown> | null
  info(name: string): TensorInfo
  /** Release the file now (see `SafeTensorsFile.close`). A second call does nothing. */
  close(): void
}

/** A companion file of a model directory. */
export interface Companion {
  file: string
  url: string
  cap: number
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

/** Compare two weight sources tensor by tensor (`names`: 'auto', 'direct' or 'llama.cpp'). */
export declare function diffWeights(a: string, b: string, names?: string | undefined | null): Promise<DiffReport>

export interface ExpectedFile {
  file: string
  etag?: string
}

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
 * An ETag header as the blob name it gives (quotes and `W/` removed), or ERR_IO naming
 * `what` when it names no blob.
 */
export declare function hubEtag(raw: string, what: string): string

export interface HubFile {
  path: string
  size?: number
  etag?: string
}

/**
 * The files of a revision a download takes: the Hub API's answer (`bytes`) read and
 * checked, filtered by the `include` / `exclude` globs.
 */
export declare function hubPlan(bytes: Uint8Array, include: string[] | null, exclude: string[]): HubPlan

export interface HubPlan {
  commit: string
  /** The files the filter takes. */
  files: Array<HubFile>
  /** The files of the revision in all. */
  listed: number
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

/** Where a Hugging Face model id stands in the local cache (from `resolveModelId`). */
export interface ModelIdTarget {
  id: string
  revision: string
  /** The cache directory looked in (null: no HF_HUB_CACHE / HF_HOME / home directory). */
  cacheDir?: string
  /** The commit the revision names in the cache, if the cache knows it. */
  commit?: string
  /** The cached snapshot directory holding config.json and weights, if any. */
  snapshot?: string
}

export interface ModelSaveOptions {
  format?: 'safetensors' | 'mlx'
  maxShardBytes?: number
  /**
   * fsync every file and the new directory before it takes the old one's place, and the
   * parent directory after (default false).
   */
  durable?: boolean
}

/**
 * `openWeights` of a local path: open off the event loop. Internal (index.js routes URLs
 * to lib/remote.js and paths here).
 */
export declare function openWeightsAsync(path: string, options?: OpenWeightsOptions): Promise<WeightsFile | GgufFile>

/** `openWeightsSync`: open and validate a file or model directory on the calling thread. */
export declare function openWeightsSync(path: string, options?: OpenWeightsOptions): WeightsFile | GgufFile

export interface ProgressEvent {
  /** The weight file, relative to the model directory. */
  file: string
  loadedBytes: number
  totalBytes: number
}

/**
 * Bytes the opener needs: `[start, end)` of the file at `url`, or (`cap` set) all of it,
 * refused past `cap` bytes.
 */
export interface RemoteRequest {
  id: number
  /** Relative to the model directory ('' for the URL opened). */
  file: string
  url: string
  /**
   * `file` lies beside the URL opened, in its URL directory (a later file of a split
   * GGUF set), not under a model directory.
   */
  beside: boolean
  start?: number
  end?: number
  cap?: number
}

/** A slice's shape and the spans holding its bytes. */
export interface RemoteSlice {
  shape: Array<number>
  spans: Array<RemoteSpan>
}

/** Where a tensor's stored bytes lie. */
export interface RemoteSpan {
  file: string
  url: string
  start: number
  length: number
}

/**
 * `target` as a Hugging Face model id: null when it names an existing path or does not look
 * like `org/name` (it is then a path); ERR_INVALID_ARGUMENT for an id (or revision) that
 * breaks huggingface_hub's rules; else the id's place in the cache (`cacheDir`, else the one
 * `vars` name: HF_HUB_CACHE / HF_HOME / XDG_CACHE_HOME / HOME, passed from `process.env`,
 * which a worker thread keeps apart from the process's). Reads the filesystem, never the
 * network.
 */
export declare function resolveModelId(target: string, revision: string | undefined | null, cacheDir: string | undefined | null, vars: Record<string, string>): ModelIdTarget | null

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

/** What `Model.save` wrote. */
export interface SaveReport {
  /**
   * The weight files, relative to the directory (`model.safetensors`, or the shards and
   * `model.safetensors.index.json`, or `weights.mlx`).
   */
  files: Array<string>
  /**
   * The tokenizer, template, generation and processor files copied from the model's own
   * directory.
   */
  companions: Array<string>
  /**
   * Files of the model's directory left out, and why (one that resolves outside it, into
   * /proc, /sys or /dev, or is not a regular file).
   */
  warnings: Array<string>
}

/** The bytes of a SafeTensors file holding `tensors`. */
export declare function serialize(tensors: Record<string, TensorInput>, options?: { metadata?: Record<string, string> }): Buffer

/**
 * The URL of the shard `name` of the model whose files lie under `base` (an http(s) URL
 * ending in `/`): the name checked (ERR_UNSAFE_PATH) and percent-encoded, so the URL stays
 * under `base` whatever its parser deletes or decodes.
 */
export declare function shardUrl(base: string, name: string): string

export interface Tensor {
  name: string
  dtype: DType
  shape: Array<number>
  data: TypedArray
}

/**
 * What every reader's `info(name)` returns (`SafeTensorsFile`, `WeightsFile`, `Model`,
 * `GgufFile`): a format adds fields, never renames them. The optional fields are the ones a
 * format adds; napi-rs sets them after the others, in this order.
 */
export interface TensorInfo {
  name: string
  /**
   * What `getTensor` serves: the stored dtype, or the one a stored type decodes to (GGUF
   * block types: F32).
   */
  dtype: DType
  /** The stored type as the format names it: 'BF16', 'Q4_K', 'torch.bfloat16', … */
  storedType: string
  /** Row-major, outermost first. */
  shape: Array<number>
  /** Bytes as stored (what `as: 'raw'` returns). */
  byteLength: number
  numel: number
  /**
   * `[start, end)` of the stored bytes in the format's data section, for formats that have
   * one (SafeTensors, GGUF; a shard's own data section in a sharded model).
   */
  dataOffsets?: [number, number]
  /** GGUF (`GgufFile.info`): the ggml type as stored ('Q4_K', 'F16', 'I32', …). */
  ggmlType?: string
  /** GGUF (`GgufFile.info`): where the stored bytes start, from the start of the file. */
  offset?: number
}

/** Every problem found in a file or directory (not only the first), with codes. */
export declare function validate(path: string): Promise<ValidationReport>

/** Check each listed file of `dir` against its hash. */
export declare function verifyFiles(dir: string, files: Array<ExpectedFile>): Promise<VerifyReport>

/** Check every file of a cache snapshot against the blob it links to. */
export declare function verifySnapshot(dir: string): Promise<VerifyReport>

/** Options of a model's `save` and `toOnnx`. */
export interface WriteOptions {
  /**
   * `fsync` each file before renaming it into place, and its directory after, so that it
   * survives a power cut once the call returns (default false; the write is atomic either way).
   */
  durable?: boolean
}
