//go:build !berth_upgrade_test

package backend

import "embed"

// buildMigrations are migrations a special build embeds beside a store's own: none in a
// release. The upgrade test builds Berth with the tag berth_upgrade_test to get a build
// that knows one schema version more than this source does (see upgrade_migrations.go).
var buildMigrations embed.FS
