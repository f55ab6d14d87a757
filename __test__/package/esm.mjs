// The import forms of docs/api.md, as an ES module: named imports, the default export and the
// namespace must be the same objects. Prints checks.cjs's result as JSON.
import * as ns from 'safetensors-node'
import sn, { SafeTensorsFile, LinearRegression, Model, convert } from 'safetensors-node'
import checks from './checks.cjs'

const { default: _default, ...named } = ns
const same = SafeTensorsFile === sn.SafeTensorsFile && LinearRegression === sn.LinearRegression && Model === sn.Model && convert === sn.convert &&
  Object.keys(named).every((k) => named[k] === sn[k]) && Object.keys(sn).length === Object.keys(named).length
const result = await checks(named)
console.log(JSON.stringify({ ...result, defaultIsNamespace: _default === sn && same }))
