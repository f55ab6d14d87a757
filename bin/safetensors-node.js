#!/usr/bin/env node
'use strict'
// safetensors-node: inspect, validate, convert and run model weights from a terminal.
// `safetensors-node --help` for the commands; the code is in bin/lib/.

// A reader that stops early (`... | head`) closes the pipe: that is not an error.
process.stdout.on('error', (e) => {
  if (e.code === 'EPIPE') process.exit(0)
  throw e
})

require('./lib/main.js')
  .run(process.argv.slice(2))
  .then((status) => {
    process.exitCode = status
  })
