//go:build berth_upgrade_test

package backend

import "embed"

// buildMigrations are, in the upgrade test's build, one migration numbered above every
// release's: a binary built with the tag berth_upgrade_test stands for the next release
// in a rolling update, and a release binary for the one it replaces.
//
//go:embed testdata/upgrade/*.sql
var buildMigrations embed.FS
