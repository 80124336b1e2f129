package backend

// The statements on provisioner_specs that both dialects write alike.

// InsertSpecSQL records provisioner $1's spec fingerprint $2 if none is recorded; it affects no
// row when one is.
const InsertSpecSQL = `
	INSERT INTO provisioner_specs (provisioner, fingerprint) VALUES ($1, $2)
	ON CONFLICT (provisioner) DO NOTHING`
