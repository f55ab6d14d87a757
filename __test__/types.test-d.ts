// Type tests of the public declarations (index.d.ts): run by `vitest --typecheck` in
// `npm test`, and by `tsc --noEmit` in CI's lint step. exports.spec.ts checks the run-time
// side of the same promises (the arrays each `as` gives, DataView refused, the error codes).
import { describe, expectTypeOf, test } from 'vitest'
import {
  GgufFile,
  LinearRegression,
  LogisticRegression,
  Model,
  SafeTensorsFile,
  convert,
  inspect,
  loadFile,
  loadFileAsync,
  openWeights,
  saveFile,
  validate,
  type ErrorCode,
  type FileReport,
  type GgufTensorInfo,
  type GgufValue,
  type LoadPretrainedOptions,
  type OpenUrlOptions,
  type RemoteGgufFile,
  type RemoteModel,
  type RemoteSafeTensorsFile,
  type RemoteWeights,
  type SafeTensorsError,
  type Tensor,
  type TensorAs,
  type TensorInput,
  type TypedArray,
  type ValidationReport,
  type WeightsFile,
} from '../index.js'

declare const file: SafeTensorsFile
declare const model: Model
declare const remote: RemoteSafeTensorsFile
declare const remoteModel: RemoteModel

describe('getTensor and its relatives are typed by `as`', () => {
  test('F32, F64, raw and the default', () => {
    expectTypeOf(file.getTensor('w', { as: 'F32' })).toEqualTypeOf<Tensor<Float32Array>>()
    expectTypeOf(file.getTensor('w', { as: 'F64' })).toEqualTypeOf<Tensor<Float64Array>>()
    expectTypeOf(file.getTensor('w', { as: 'raw' })).toEqualTypeOf<Tensor<Uint8Array>>()
    expectTypeOf(file.getTensor('w', { as: 'native' })).toEqualTypeOf<Tensor<TypedArray>>()
    expectTypeOf(file.getTensor('w')).toEqualTypeOf<Tensor<TypedArray>>()
    expectTypeOf(file.getTensor('w', { copy: true })).toEqualTypeOf<Tensor<TypedArray>>()
    expectTypeOf(file.getTensor('w', null)).toEqualTypeOf<Tensor<TypedArray>>()
    expectTypeOf(file.getTensor('w', { as: 'F32', copy: true }).data).toEqualTypeOf<Float32Array>()
  })

  test('an `as` known only as a union gives the union of arrays', () => {
    const as = 'F32' as 'F32' | 'raw'
    expectTypeOf(file.getTensor('w', { as }).data).toEqualTypeOf<Float32Array | Uint8Array>()
    expectTypeOf(file.getTensor('w', { as: 'F64' as TensorAs }).data).toEqualTypeOf<TypedArray>()
  })

  test('async, slices, every tensor, models, remote files and loadFile alike', () => {
    expectTypeOf(file.getTensorAsync('w', { as: 'F32' })).toEqualTypeOf<Promise<Tensor<Float32Array>>>()
    expectTypeOf(file.getSlice('w', [[0, 2], 1, null], { as: 'F64' })).toEqualTypeOf<Tensor<Float64Array>>()
    expectTypeOf(file.getSliceAsync('w', [null], { as: 'raw' })).toEqualTypeOf<Promise<Tensor<Uint8Array>>>()
    expectTypeOf(file.tensors({ as: 'F32' })).toEqualTypeOf<Record<string, Tensor<Float32Array>>>()
    expectTypeOf(file.tensorsAsync({ as: 'F32' })).toEqualTypeOf<Promise<Record<string, Tensor<Float32Array>>>>()
    expectTypeOf(model.getTensor('w', { as: 'F32' })).toEqualTypeOf<Tensor<Float32Array>>()
    expectTypeOf(model.getTensorAsync('w', { as: 'raw' })).toEqualTypeOf<Promise<Tensor<Uint8Array>>>()
    expectTypeOf(model.tensors({ as: 'F64' })).toEqualTypeOf<Record<string, Tensor<Float64Array>>>()
    expectTypeOf(remote.getTensorAsync('w', { as: 'F32' })).toEqualTypeOf<Promise<Tensor<Float32Array>>>()
    expectTypeOf(remoteModel.tensorsAsync({ as: 'F32' })).toEqualTypeOf<Promise<Record<string, Tensor<Float32Array>>>>()
    expectTypeOf(loadFile('a.safetensors', { as: 'F32' })).toEqualTypeOf<Record<string, Tensor<Float32Array>>>()
    expectTypeOf(loadFileAsync('a.safetensors')).toEqualTypeOf<Promise<Record<string, Tensor<TypedArray>>>>()
  })

  test('what `as` cannot be', () => {
    // @ts-expect-error F16 is a stored type, not a form getTensor returns
    file.getTensor('w', { as: 'F16' })
    // @ts-expect-error loadPretrained's default form is 'native' or 'F32' only
    Model.loadPretrained('dir', { as: 'raw' })
  })
})

describe('errors', () => {
  test('ErrorCode is the union of codes; SafeTensorsError has code, path and tensor', () => {
    expectTypeOf<'ERR_NOT_FOUND'>().toExtend<ErrorCode>()
    expectTypeOf<'ERR_INVALID_ARGUMENT'>().toExtend<ErrorCode>()
    expectTypeOf<'ERR_CLOSED'>().toExtend<ErrorCode>()
    expectTypeOf<'ERR_NOPE'>().not.toExtend<ErrorCode>()
    expectTypeOf<string>().not.toExtend<ErrorCode>()
    expectTypeOf<SafeTensorsError>().toExtend<Error>()
    expectTypeOf<SafeTensorsError['code']>().toEqualTypeOf<ErrorCode>()
    expectTypeOf<SafeTensorsError['path']>().toEqualTypeOf<string | undefined>()
    expectTypeOf<SafeTensorsError['tensor']>().toEqualTypeOf<string | undefined>()
    expectTypeOf<ValidationReport['errors'][number]['code']>().toEqualTypeOf<ErrorCode>()
  })
})

describe('inputs and callbacks match what the run time does', () => {
  test('TensorInput takes typed arrays and number[], not a DataView', () => {
    expectTypeOf<{ shape: [2]; data: Float32Array }>().toExtend<TensorInput>()
    expectTypeOf<{ shape: [2]; data: number[]; dtype: 'BF16' }>().toExtend<TensorInput>()
    expectTypeOf<{ shape: [2]; data: BigInt64Array }>().toExtend<TensorInput>()
    expectTypeOf<{ shape: [2]; data: DataView }>().not.toExtend<TensorInput>()
    // @ts-expect-error a DataView is refused at run time (ERR_INVALID_ARGUMENT)
    saveFile('a.safetensors', { x: { shape: [4], data: new DataView(new ArrayBuffer(4)) } })
  })

  test('onProgress: totalBytes may be null', () => {
    type Progress = Parameters<NonNullable<LoadPretrainedOptions['onProgress']>>[0]
    expectTypeOf<Progress['totalBytes']>().toEqualTypeOf<number | null>()
    type UrlProgress = Parameters<NonNullable<OpenUrlOptions['onProgress']>>[0]
    expectTypeOf<UrlProgress['totalBytes']>().toEqualTypeOf<number | null>()
  })

  test('loadPretrained: a URL gives a RemoteModel, a path a Model', () => {
    expectTypeOf(Model.loadPretrained('https://host/m/')).toEqualTypeOf<Promise<RemoteModel>>()
    expectTypeOf(Model.loadPretrained('./m')).toEqualTypeOf<Promise<Model>>()
    expectTypeOf(SafeTensorsFile.openUrl('https://host/a.safetensors')).toEqualTypeOf<Promise<RemoteSafeTensorsFile>>()
  })

  test('remote readers have no synchronous read: getTensor, getSlice and tensors are Promises', () => {
    expectTypeOf(remote.getTensor('w', { as: 'F32' })).toEqualTypeOf<Promise<Tensor<Float32Array>>>()
    expectTypeOf(remote.getSlice('w', [0], { as: 'raw' })).toEqualTypeOf<Promise<Tensor<Uint8Array>>>()
    expectTypeOf(remoteModel.tensors()).toEqualTypeOf<Promise<Record<string, Tensor<TypedArray>>>>()
    expectTypeOf(openWeights('https://host/m.bin')).toEqualTypeOf<Promise<RemoteWeights>>()
    expectTypeOf(GgufFile.openUrl('https://host/m.gguf')).toEqualTypeOf<Promise<RemoteGgufFile>>()
    expectTypeOf<RemoteModel>().toMatchTypeOf<RemoteWeights>()
    expectTypeOf<RemoteModel['dir']>().toEqualTypeOf<string>()
  })

  test('model ids: the cache gives a Model; an endpoint may give a RemoteModel', () => {
    expectTypeOf(Model.loadPretrained('org/name', { revision: 'v1', cacheDir: '/c' })).toEqualTypeOf<Promise<Model>>()
    expectTypeOf(Model.loadPretrained('org/name', { endpoint: 'https://huggingface.co', token: 't' })).toEqualTypeOf<Promise<Model | RemoteModel>>()
    expectTypeOf(Model.loadPretrainedSync('org/name', { revision: 'main' })).toEqualTypeOf<Model>()
    // @ts-expect-error the sync form reads the cache only: no endpoint
    Model.loadPretrainedSync('org/name', { endpoint: 'https://huggingface.co' })
    expectTypeOf(inspect('https://host/m.safetensors', { timeoutMs: 5000 })).toEqualTypeOf<Promise<FileReport>>()
  })

  test('reports and models', () => {
    expectTypeOf(inspect('a')).toEqualTypeOf<Promise<FileReport>>()
    expectTypeOf(validate('a')).toEqualTypeOf<Promise<ValidationReport>>()
    expectTypeOf(convert).parameter(2).toHaveProperty('to')
    expectTypeOf(new LinearRegression().fit([[1]], [1])).toEqualTypeOf<LinearRegression>()
    expectTypeOf(new LogisticRegression().predict([[1]])).toEqualTypeOf<Int32Array>()
  })
})

describe('GgufFile', () => {
  test('a WeightsFile with its header typed; getTensor typed by `as`', () => {
    const g = GgufFile.open('m.gguf')
    expectTypeOf(g).toMatchTypeOf<WeightsFile>()
    expectTypeOf(GgufFile.openAsync('m.gguf')).toEqualTypeOf<Promise<GgufFile>>()
    expectTypeOf(g.format).toEqualTypeOf<'gguf'>()
    expectTypeOf(g.version).toEqualTypeOf<number>()
    expectTypeOf(g.metadata).toEqualTypeOf<Record<string, GgufValue>>()
    expectTypeOf(g.info('w')).toEqualTypeOf<GgufTensorInfo>()
    expectTypeOf(g.info('w').ggmlType).toEqualTypeOf<string>()
    expectTypeOf(g.info('w').offset).toEqualTypeOf<number>()
    expectTypeOf(g.getTensor('w', { as: 'raw' })).toEqualTypeOf<Tensor<Uint8Array>>()
    expectTypeOf(g.getTensorAsync('w', { as: 'F32' })).toEqualTypeOf<Promise<Tensor<Float32Array>>>()
    expectTypeOf<bigint>().toMatchTypeOf<GgufValue>()
    expectTypeOf<Float32Array>().toMatchTypeOf<GgufValue>()
    expectTypeOf<string[]>().toMatchTypeOf<GgufValue>()
  })
})

describe('closing', () => {
  test('every weights class has close() and [Symbol.dispose]() (so `using` works)', async () => {
    expectTypeOf(file.close).toEqualTypeOf<() => void>()
    expectTypeOf(file[Symbol.dispose]).toEqualTypeOf<() => void>()
    const model = await Model.loadPretrained('dir')
    expectTypeOf(model.close).toEqualTypeOf<() => void>()
    expectTypeOf(model[Symbol.dispose]).toEqualTypeOf<() => void>()
    const remote = await SafeTensorsFile.openUrl('https://x/y.safetensors')
    expectTypeOf(remote[Symbol.dispose]).toEqualTypeOf<() => void>()
    const remoteModel: RemoteModel = await Model.loadPretrained('https://x/dir')
    expectTypeOf(remoteModel.close).toEqualTypeOf<() => void>()
    // @ts-expect-error close takes no argument
    file.close(true)
  })
})

describe('Model', () => {
  test('predict gives values or labels, predictProba probabilities; getSlice typed by `as`', async () => {
    const model = await Model.loadPretrained('dir')
    const x = { rows: 1, cols: 2, data: new Float32Array(2) }
    expectTypeOf(model.predict(x)).toEqualTypeOf<Float32Array | Int32Array>()
    expectTypeOf(model.predictProba(x)).toEqualTypeOf<Float32Array>()
    expectTypeOf(model.getSlice('w', [[0, 1]], { as: 'F32' })).toEqualTypeOf<Tensor<Float32Array>>()
    expectTypeOf(model.getSliceAsync('w', [0])).toEqualTypeOf<Promise<Tensor<TypedArray>>>()
  })
})

describe('what is not public', () => {
  test('no constructor for the classes made by factories; no internals', () => {
    // @ts-expect-error instances come from open / openAsync / fromBytes / openUrl
    new SafeTensorsFile()
    // @ts-expect-error instances come from loadPretrained / loadPretrainedSync
    new Model()
    // @ts-expect-error instances come from open / openAsync / openWeights
    new GgufFile()
    // @ts-expect-error internal to the HTTP layer
    SafeTensorsFile.fromHeader
    // @ts-expect-error internal to index.js
    Model.loadPretrainedDir
    // @ts-expect-error internal to the HTTP layer
    file.fileRange
  })
})
