// safetensors-node for ES modules: the CommonJS entry's exports as named exports and as the
// default export. One instance serves both module systems (no dual-package hazard): this
// file only re-exports what index.js built.
import api from './index.js'

export const {
  SafeTensorsFile,
  GgufFile,
  Model,
  LinearRegression,
  LogisticRegression,
  loadFile,
  loadFileAsync,
  saveFile,
  saveFileAsync,
  serialize,
  convert,
  inspect,
  validate,
  openWeights,
  openWeightsSync,
  download,
  verify,
  diff,
} = api
export default api
