'use strict'

/** A failure of the operation (exit status 1), with a stable code like the library's errors. */
class CliError extends Error {
  constructor(code, message) {
    super(message)
    this.name = 'CliError'
    this.code = code
  }
}

/** A command line that cannot be run (exit status 2); `command` selects the usage line shown. */
class UsageError extends Error {
  constructor(message, command) {
    super(message)
    this.name = 'UsageError'
    this.code = 'ERR_USAGE'
    this.command = command
  }
}

module.exports = { CliError, UsageError }
