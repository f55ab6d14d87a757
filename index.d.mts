// safetensors-node for ES modules: the same declarations as index.d.ts, as named exports and
// as the default export (index.mjs).
import * as api from './index.js'

export * from './index.js'
export default api
