package postgres

import (
	"strconv"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// Name is the postgres resource type's name.
const Name domain.ResourceType = "postgres"

// DefaultConnections is the connection limit of a database whose args do not say.
const DefaultConnections = 10

// MaxConnections bounds args.connections for every provisioner; a spec's max_connections
// may bound it lower.
const MaxConnections = 10_000

// Types are the resource types the postgres environ serves.
var Types = []*environ.TypeDef{TypeDef}

// TypeDef is the postgres resource type's definition.
var TypeDef = &environ.TypeDef{
	Name: Name,
	Help: "a database and its own role on a shared PostgreSQL server",
	Args: []environ.ArgDef{
		{Name: "connections", Help: "whole number, 1 to " + strconv.Itoa(MaxConnections) + ", the role's connection limit", Default: strconv.Itoa(DefaultConnections)},
	},
	Validate: func(args map[string]any) error {
		_, err := DecodeArgs(args)
		return err
	},
}

// Args are the desired arguments of a postgres resource.
type Args struct {
	Connections int // the role's CONNECTION LIMIT
}

// DecodeArgs decodes args strictly: an unknown key or a wrong type is a *domain.FieldError.
func DecodeArgs(args map[string]any) (*Args, error) {
	if err := environ.OnlyKeys("args", args, "connections"); err != nil {
		return nil, err
	}
	out := &Args{Connections: DefaultConnections}
	if v, ok := args["connections"]; ok {
		n, err := environ.WholeNumber("args.connections", v, 1, MaxConnections)
		if err != nil {
			return nil, err
		}
		out.Connections = int(n)
	}
	return out, nil
}

// Config is what clients use to reach a postgres resource. It holds no secret, because the
// row is copied into backups, store copies and CLI output: PasswordFile names the file that
// holds the role's password, which clients read with access of their own.
type Config struct {
	Host         string
	Port         int
	Database     string
	User         string
	PasswordFile string
}

// AsMap returns the config as stored in the resources table.
func (c *Config) AsMap() map[string]any {
	return map[string]any{
		"host":          c.Host,
		"port":          c.Port,
		"database":      c.Database,
		"user":          c.User,
		"password_file": c.PasswordFile,
	}
}
