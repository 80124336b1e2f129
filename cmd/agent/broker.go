package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/external"
)

func newBrokerCommand(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Work with out-of-process brokers (provisioner type external)",
		Long: `A provisioner of type external talks to a broker in another process, written in any
language, over Berth's broker protocol (HTTP/JSON, docs/brokers/external.openapi.yaml).
berth broker verify holds a broker to the protocol's contract before an agent uses it.`,
		Example: `  berth broker verify --type folder --command "python3 examples/brokers/python/broker.py"`,
	}
	cmd.AddCommand(newBrokerVerifyCommand(opts))
	return cmd
}

// brokerVerifyFlags are the flags of berth broker verify.
type brokerVerifyFlags struct {
	command      string
	socket       string
	url          string
	caFile       string
	tokenFile    string
	resourceType string
	args         string
	readyTimeout time.Duration
}

func newBrokerVerifyCommand(opts *globalOptions) *cobra.Command {
	var f brokerVerifyFlags
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Run the broker protocol's conformance suite against a broker",
		Long: `Run the conformance suite of the broker protocol (docs/brokers/writing-a-broker.md) against
a broker: one it starts (--command, as the agent would: the socket to listen on is in
BERTH_BROKER_SOCKET) or one it dials (--socket, or --url with --ca-file and --token-file).

It provisions resources of --type (with --args), and checks: the handshake; check; that a
reconcile run twice gives the same resource; await-ready and check-resource; that a call under
a stale lease token is refused; that an unknown arg is refused as permanent; that a call whose
deadline passed is refused and a cancelled call returns promptly; hibernate and wake (when the
broker lists the capability); that deprovision, again and of a resource that never existed,
succeeds. It deprovisions what it made.

One line per check: PASS or FAIL and why. The exit code is 0 only when every check passes.`,
		Example: `  berth broker verify --type folder --command "python3 examples/brokers/python/broker.py --root /var/tmp/folders"
  berth broker verify --type bucket --socket /run/bucket-broker.sock --args '{"size": 2}'
  berth broker verify --type bucket --url https://broker.internal:8443 --ca-file ca.pem --token-file token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, cfg, err := f.spec()
			if err != nil {
				return usageError(err)
			}
			logger, err := opts.newLogger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			results, err := external.Verify(cmd.Context(), spec, cfg, environ.Deps{Logger: logger, Clock: opts.clock})
			if err != nil {
				return usageError(fmt.Errorf("the broker flags: %w", err))
			}
			failed := 0
			out := cmd.OutOrStdout()
			for _, r := range results {
				verdict := "PASS"
				if !r.Passed {
					verdict = "FAIL"
					failed++
				}
				line := verdict + " " + r.Name
				if r.Detail != "" {
					line += ": " + r.Detail
				}
				fmt.Fprintln(out, line)
			}
			if failed > 0 {
				return failedError(fmt.Errorf("%d of %d checks failed", failed, len(results)))
			}
			_, err = fmt.Fprintf(out, "all %d checks passed\n", len(results))
			return err
		},
	}
	flags := cmd.Flags()
	flags.StringVar(&f.command, "command", "", `start the broker with this command line, split at spaces (e.g. "python3 broker.py")`)
	flags.StringVar(&f.socket, "socket", "", "dial a broker listening on this unix socket")
	flags.StringVar(&f.url, "url", "", "dial a broker at this https:// URL")
	flags.StringVar(&f.caFile, "ca-file", "", "with --url: PEM file of the CAs that sign the broker's certificate")
	flags.StringVar(&f.tokenFile, "token-file", "", "with --url: file holding the bearer token")
	flags.StringVar(&f.resourceType, "type", "", "resource type to provision (one the broker serves)")
	flags.StringVar(&f.args, "args", "{}", "valid args of --type, as a JSON object")
	flags.DurationVar(&f.readyTimeout, "ready-timeout", time.Minute, "how long a resource may take to be ready")
	return cmd
}

// spec is the provisioner spec and suite config the flags say, or an error naming the flag
// and the fix.
func (f *brokerVerifyFlags) spec() (json.RawMessage, external.VerifyConfig, error) {
	cfg := external.VerifyConfig{Type: f.resourceType, ReadyTimeout: f.readyTimeout}
	if f.resourceType == "" {
		return nil, cfg, errors.New("--type is missing: give a resource type the broker serves (its GET /v1/info lists them)")
	}
	if err := json.Unmarshal([]byte(f.args), &cfg.Args); err != nil || cfg.Args == nil {
		return nil, cfg, fmt.Errorf("--args %q is not a JSON object: give valid args of --type, e.g. '{\"size_mb\": 1}'", f.args)
	}
	given := 0
	for _, v := range []string{f.command, f.socket, f.url} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		return nil, cfg, errors.New("give exactly one of --command (a broker to start), --socket (a unix socket) and --url (https://...)")
	}
	if (f.caFile != "" || f.tokenFile != "") && f.url == "" {
		return nil, cfg, errors.New("--ca-file and --token-file go with --url: drop them, or dial the broker with --url")
	}
	spec := map[string]any{"types": []string{f.resourceType}}
	switch {
	case f.command != "":
		spec["command"] = strings.Fields(f.command)
	case f.socket != "":
		spec["socket"] = f.socket
	default:
		spec["url"] = f.url
		if f.caFile != "" {
			spec["ca_file"] = f.caFile
		}
		if f.tokenFile != "" {
			spec["token_file"] = f.tokenFile
		}
	}
	data, err := json.Marshal(spec)
	return data, cfg, err
}
