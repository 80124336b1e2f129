// Package quickstart runs the README's quick start exactly as it is written there, so that
// the first thing a newcomer types keeps working.
//
// The test reads the three shell blocks README.md marks with `<!-- quickstart: agent -->`,
// `<!-- quickstart: client -->` and `<!-- quickstart: next -->`. It starts the agent block
// (`make run`) in the repository root in its own process group, with HOME and the XDG
// directories in a fresh temporary directory (so the embedded database starts empty there)
// and without BERTH_DATABASE_URL, waits for the agent's /readyz, runs every client command
// and then every Next command in order through bash, checks each exits 0 and that the output
// says what the README says: a ready resource with its host and config, the pool's capacity
// with the runtime's slots used right after the create, its history, the deletion, and
// `berth status` finding the agent on its port through the agents table, on the CLI's
// database. It then sends SIGINT to the process group, as Ctrl-C in a terminal would, and
// checks that the agent and the dev hosts stop cleanly and nothing is left. It also holds
// the README's prose to two promises: the log line it says to wait for appears, and the
// agent's first log line names the database file (in the fresh home).
//
// Only two things differ from a newcomer's terminal, both through the environment: the
// agent's HTTP endpoint and the dev hosts listen on free ports (RUN_ARGS and
// BERTH_DEV_HOSTS_BASE_PORT, which make run documents), so the test runs beside anything
// else; and the Go build cache, module cache and go env file stay the caller's, so the
// README's `make run` rebuilds nothing that `make test` (or an earlier build) already built.
package quickstart
