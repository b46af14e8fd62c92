package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/idnhq/idn/internal/gatewayd"
)

func init() {
	register(&command{name: "serve", summary: "run the gateway (the default command)", run: runServe})
	defaultCommand = "serve"
}

// runServe reads every GATEWAY_* and IDN_* setting, validates them all, and
// serves until SIGINT or SIGTERM, then drains in-flight requests within
// GATEWAY_SHUTDOWN_TIMEOUT_SECONDS.
func runServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("serve")
	if err := parseFlags(env, fs, "[--master-key KEY] (configured by GATEWAY_* and IDN_* variables)", args); err != nil {
		return err
	}
	getenv := env.getenv
	if key := flagString(fs, "master-key"); key != "" {
		getenv = func(name string) string {
			if name == "GATEWAY_MASTER_KEY" {
				return key
			}
			return env.getenv(name)
		}
	}
	settings, err := gatewayd.LoadSettings(getenv, os.Environ())
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(env.stderr, nil))
	gcPercent := gatewayd.TuneGC(env.getenv)
	gw, err := gatewayd.New(ctx, settings, logger)
	if err != nil {
		return err
	}
	defer gw.Close()
	ln, err := net.Listen("tcp", settings.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", settings.Addr, err)
	}
	logger.Info("gateway listening", "addr", ln.Addr().String(), "data_dir", settings.DataDir,
		"registry", settings.RegistryURL, "admin_access", string(settings.AdminMode), "gateway_did", gw.Identity().DID(), "gogc", gcPercent)
	return gw.Serve(ctx, ln)
}
