// Prints one plain closing line, `vitest: N passed, N failed, N skipped`, so CI logs state the
// result in a form any reader (human or tool) can find.
export default class SummaryReporter {
  onTestRunEnd(testModules, unhandledErrors) {
    let passed = 0
    let failed = 0
    let skipped = 0
    for (const mod of testModules) {
      if (mod.state() === 'failed' && [...mod.children.allTests()].length === 0) failed++
      for (const test of mod.children.allTests()) {
        const state = test.result().state
        if (state === 'passed') passed++
        else if (state === 'failed') failed++
        else skipped++
      }
    }
    failed += unhandledErrors?.length ?? 0
    console.log(`vitest: ${passed} passed, ${failed} failed, ${skipped} skipped`)
  }
}
