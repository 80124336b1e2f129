package kubernetes

import (
	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/runtime"
)

// Types are the resource types the kubernetes environ serves: runtimes (a Deployment) and
// ClickHouse databases (a StatefulSet).
var Types = []*environ.TypeDef{runtime.Type, ClickhouseType}

// ClickhouseType is the clickhouse type's definition.
var ClickhouseType = &environ.TypeDef{
	Name: domain.ResourceTypeClickHouse,
	Help: "a ClickHouse database on a Kubernetes cluster",
	Validate: func(args map[string]any) error {
		_, err := DecodeClickhouseArgs(args)
		return err
	},
}

// ClickhouseArgs are the desired arguments of a clickhouse resource. It takes none yet.
type ClickhouseArgs struct{}

// DecodeClickhouseArgs decodes args strictly.
func DecodeClickhouseArgs(args map[string]any) (*ClickhouseArgs, error) {
	if err := environ.OnlyKeys("args", args); err != nil {
		return nil, err
	}
	return &ClickhouseArgs{}, nil
}

// ClickhouseConfig is what clients use to reach a clickhouse resource. It holds no secret,
// because the row is copied into backups, store copies and CLI output: the DSN carries no
// password, and PasswordSecret* name the Kubernetes Secret key that holds it, which clients
// read with credentials of their own.
type ClickhouseConfig struct {
	DSN                     string
	PasswordSecretNamespace string
	PasswordSecretName      string
	PasswordSecretKey       string
}

// DecodeClickhouseConfig decodes cfg strictly.
func DecodeClickhouseConfig(cfg map[string]any) (*ClickhouseConfig, error) {
	if err := environ.OnlyKeys("config", cfg, "dsn", "password_secret_namespace", "password_secret_name", "password_secret_key"); err != nil {
		return nil, err
	}
	out := &ClickhouseConfig{}
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"dsn", &out.DSN},
		{"password_secret_namespace", &out.PasswordSecretNamespace},
		{"password_secret_name", &out.PasswordSecretName},
		{"password_secret_key", &out.PasswordSecretKey},
	} {
		v, err := environ.OptionalString("config."+f.key, cfg[f.key])
		if err != nil {
			return nil, err
		}
		*f.dst = v
	}
	return out, nil
}

// AsMap returns the config as stored in the resources table.
func (c *ClickhouseConfig) AsMap() map[string]any {
	return map[string]any{
		"dsn":                       c.DSN,
		"password_secret_namespace": c.PasswordSecretNamespace,
		"password_secret_name":      c.PasswordSecretName,
		"password_secret_key":       c.PasswordSecretKey,
	}
}

var _ environ.TypeDefiner = (*kubeEnviron)(nil)

// DefinedTypes implements environ.TypeDefiner: the types the provisioner's spec defines.
func (e *kubeEnviron) DefinedTypes() []*environ.TypeDef { return e.definitions }
