// Run before each spec file (vitest.config.mjs, setupFiles): what every spec shares.
import { afterAll } from 'vitest'
import { removeTempDirs } from './helpers'

afterAll(removeTempDirs)
