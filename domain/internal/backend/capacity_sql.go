package backend

// The statements on capacity_samples and capacity_warnings that both dialects write alike.

// InsertCapacitySampleSQL records a capacity sample, unless one of its provisioner and host at
// its time is recorded already.
const InsertCapacitySampleSQL = `
	INSERT INTO capacity_samples (at, provisioner, host, unit, total, used, down)
	VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (provisioner, host, at) DO NOTHING`

// ListCapacityWarningsSQL reads every capacity warning, by provisioner and kind.
const ListCapacityWarningsSQL = `SELECT provisioner, kind, active, message, since FROM capacity_warnings ORDER BY provisioner, kind`
