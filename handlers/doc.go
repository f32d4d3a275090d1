// Package handlers binds the XXL-JOB handler names that operators type into
// the console (JobHandler) to the domain code: it parses each job's param,
// calls the domain, and turns the outcome into run-log lines and a result.
// It holds no SQL and no HTTP.
package handlers
