// Types of wasm-describe.mjs (plain JS: the browser page imports it as it is).
export declare const MODES: readonly ['native', 'F32', 'F64', 'raw']
export declare function canon(value: unknown): unknown
export declare function describe(file: unknown): Promise<Record<string, unknown>>
