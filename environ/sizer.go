package environ

// Sizer is implemented by environs that know a resource's size in their own unit (the
// unit of their Capacity, e.g. a runtime's slots). The provisioner admits a resource at its
// size against its owner's quota on the provisioner (domain.QuotaStore) before it asks the
// environ to provision or grow it; a resource of an environ without Sizer counts 0 units
// and 1 resource.
type Sizer interface {
	// Units is the size of resource r with the args of opts. Args it cannot read are a
	// *domain.FieldError, as Reconcile would give.
	Units(r *Resource, opts *ResourceOptions) (int64, error)
}
