package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// refHelp explains the ID|NAME argument in the help of every command that takes one.
const refHelp = `The resource is given by its ID or by its name. A name is unique per owner and type
(ignoring case), so where several owners or types use it, --owner and --type say which one
is meant; with an ID they only have to agree with the resource.`

// resourceRef is the --owner and --type flags that narrow the ID|NAME argument of a command
// acting on one resource.
type resourceRef struct {
	owner string
	typ   string
	types *environ.Catalog // the types --type may name
}

func (ref *resourceRef) addFlags(cmd *cobra.Command, types *environ.Catalog) {
	ref.types = types
	cmd.Flags().StringVar(&ref.owner, "owner", "", "owner of the resource named (needed when several owners use the name)")
	cmd.Flags().StringVar(&ref.typ, "type", "", "type of the resource named: "+types.Names()+" (needed when several types use the name)")
}

// resolve returns the resource arg names: the one with that id when arg is a UUID, else the
// one with that name (ignoring case) among those of --owner and --type. Its errors name the
// flag or argument to fix; none found wraps domain.ErrNotFound.
func (ref *resourceRef) resolve(ctx context.Context, cmd *cobra.Command, svc *domain.Service, arg string) (domain.Resource, error) {
	arg = strings.TrimSpace(arg)
	ownerSet := cmd.Flags().Changed("owner")
	var typ domain.ResourceType
	if ref.typ != "" {
		t, err := parseTypeFlag(ref.types, ref.typ)
		if err != nil {
			return domain.Resource{}, err
		}
		typ = t
	}
	if _, err := uuid.Parse(arg); err == nil {
		r, err := svc.Get(ctx, arg)
		if err != nil {
			return domain.Resource{}, storeError(err)
		}
		if (ownerSet && r.Owner != ref.owner) || (typ != "" && r.Type != typ) {
			return domain.Resource{}, fmt.Errorf("--owner/--type: resource %s is a %s of owner %q, not what --owner and --type say: leave them out with an ID", r.ID, r.Type, r.Owner)
		}
		return r, nil
	}
	candidates, err := svc.List(ctx, domain.ListFilter{Owner: ref.owner, Type: typ})
	if err != nil {
		return domain.Resource{}, flagError(err)
	}
	var found []domain.Resource
	for _, r := range candidates {
		if strings.EqualFold(r.Name, arg) && (!ownerSet || r.Owner == ref.owner) {
			found = append(found, r)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		scope := ""
		if ownerSet {
			scope += fmt.Sprintf(" of owner %q", ref.owner)
		}
		if typ != "" {
			scope += fmt.Sprintf(" of type %s", typ)
		}
		return domain.Resource{}, storeError(fmt.Errorf("resource %q: no resource%s has this name, and it is no ID (resource ids are UUIDs): %w", arg, scope, domain.ErrNotFound))
	default:
		which := make([]string, len(found))
		for i, r := range found {
			which[i] = fmt.Sprintf("%s (%s of owner %q)", r.ID, r.Type, r.Owner)
		}
		return domain.Resource{}, fmt.Errorf("resource %q: %d resources have this name: %s; say which with --owner and --type, or give the ID",
			arg, len(found), strings.Join(which, ", "))
	}
}
