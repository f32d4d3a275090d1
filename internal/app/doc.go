// Package app wires the executor from its configuration: the connections
// (MySQL, Redis, the RabbitMQ timer), the domain objects on them (the close
// path, the lifecycle jobs, the delayed-task dispatcher), and the serving
// process's components with their order of start and stop. cmd/executor
// parses flags and dispatches subcommands onto it; cmd/bench measures the
// close path and the dispatcher as it builds them.
package app
