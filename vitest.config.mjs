import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['__test__/**/*.spec.ts'],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    // Native addon + child processes: forks isolate crashes and keep memory accounting honest.
    pool: 'forks',
    // Removes the spec's temporary directories when it ends.
    setupFiles: ['./__test__/setup.ts'],
    reporters: ['default', './__test__/summary-reporter.mjs'],
    // Type tests of the public declarations (tsc over __test__/*.test-d.ts).
    typecheck: { enabled: true, include: ['__test__/**/*.test-d.ts'], tsconfig: './tsconfig.json' },
  },
})
