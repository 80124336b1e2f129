// Package statetest is the contract suite of domain.State: the behaviour every storage backend
// must show, the CLI's and the agent's writes and those of programs that write the tables with
// plain SQL alike. Each backend's test package runs it on its own databases:
//
//	func TestContract(t *testing.T) { statetest.Run(t, newBackend) }
//
// A backend that passes it behaves as the others do; the suite is where "the same behaviour"
// is defined, so a behaviour one backend needs is tested here, for all of them.
package statetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// Dialect names the SQL a backend's database speaks.
type Dialect string

const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// ExecFunc runs one statement and returns how many rows it affected.
type ExecFunc func(ctx context.Context, query string, args ...any) (int64, error)

// Row is one row of a query's result.
type Row interface {
	Scan(dest ...any) error
}

// Backend is one store under test, on a database of the test's own with the schema migrated.
// The direct-SQL hooks reach the database as another program would (not through State); the
// suite writes SQL both dialects run, with $1-style placeholders and time.Time arguments for
// times, except where it says which dialect a statement is for.
type Backend struct {
	domain.State
	Dialect Dialect
	// Exec runs one statement directly.
	Exec ExecFunc
	// QueryRow runs a query directly and returns its first row.
	QueryRow func(ctx context.Context, query string, args ...any) Row
	// Tx runs f in one transaction, directly; f's statements go through the ExecFunc it gets.
	Tx func(ctx context.Context, f func(exec ExecFunc) error) error
	// Reopen opens another State on the same database, as a second agent or a CLI command
	// would; it is closed when t ends.
	Reopen func(t *testing.T) domain.State
}

// Run runs the suite; newBackend gives each test a backend on a fresh database.
func Run(t *testing.T, newBackend func(t *testing.T) *Backend) {
	for _, tc := range append(tests, quotaTests...) {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newBackend(t)) })
	}
}

var tests = []struct {
	name string
	run  func(t *testing.T, b *Backend)
}{
	{"CreateResource", testCreateResource},
	{"GetAndListResources", testGetAndListResources},
	{"UpdateResourceArgs", testUpdateResourceArgs},
	{"RequestDeleteIsIdempotent", testRequestDeleteIsIdempotent},
	{"DirectSQLGetsTheSameBehaviour", testDirectSQLGetsTheSameBehaviour},
	{"DirectInsert", testDirectInsert},
	{"ResourcesNeedingAttention", testResourcesNeedingAttention},
	{"LeaseContentionAndExpiry", testLeaseContentionAndExpiry},
	{"ClaimAndStartRecordsWhatRecordProgressWould", testClaimAndStartRecordsWhatRecordProgressWould},
	{"ClaimAndStartLeavesOtherRowsClaimedOnly", testClaimAndStartLeavesOtherRowsClaimedOnly},
	{"RecordProgress", testRecordProgress},
	{"RecordProgressReleasesTheLease", testRecordProgressReleasesTheLease},
	{"RecordProgressRecordsThePassedStep", testRecordProgressRecordsThePassedStep},
	{"FinalizeDelete", testFinalizeDelete},
	{"MissingResources", testMissingResources},
	{"ChangeLog", testChangeLog},
	{"NewestChanges", testNewestChanges},
	{"ListenerWakesOnChange", testListenerWakesOnChange},
	{"ListenerWakesOnOtherWriters", testListenerWakesOnOtherWriters},
	{"ListenerCloseInterruptsWait", testListenerCloseInterruptsWait},
	{"ReserveSlotsNeverOverfillsUnderContention", testReserveSlotsNeverOverfillsUnderContention},
	{"ReserveSlotsResizesAndReportsUsage", testReserveSlotsResizesAndReportsUsage},
	{"SlotUsageFollowsEveryWriter", testSlotUsageFollowsEveryWriter},
	{"SlotUsageStaysRightUnderContention", testSlotUsageStaysRightUnderContention},
	{"GetReservation", testGetReservation},
	{"GetReservations", testGetReservations},
	{"ReservedByHost", testReservedByHost},
	{"OrphanedReservations", testOrphanedReservations},
	{"ApplyProvisionerSpecBumpsOnlyOnChange", testApplyProvisionerSpecBumpsOnlyOnChange},
	{"ApplyProvisionerSpecOnceForAgentsStartingTogether", testApplyProvisionerSpecOnceForAgentsStartingTogether},
	{"ApplyProvisionerSpecNamesMissingFields", testApplyProvisionerSpecNamesMissingFields},
	{"ProvisionerBackFromAbsentBumps", testProvisionerBackFromAbsentBumps},
	{"MarkProvisionersAbsentSparesThePresent", testMarkProvisionersAbsentSparesThePresent},
	{"RecordHealth", testRecordHealth},
	{"UnhealthySinceFollowsTheStatus", testUnhealthySinceFollowsTheStatus},
	{"RecordHealthLosesToArgsChangesAndDeletes", testRecordHealthLosesToArgsChangesAndDeletes},
	{"StaleHealthRecordsAreRefused", testStaleHealthRecordsAreRefused},
	{"RepairsOfARefusedRecordAreKept", testRepairsOfARefusedRecordAreKept},
	{"RepairsLoseToAHibernate", testRepairsLoseToAHibernate},
	{"RepairsOfAGoneRowReserveNothing", testRepairsOfAGoneRowReserveNothing},
	{"EventsRecordEveryStatusChange", testEventsRecordEveryStatusChange},
	{"HistoryIsKeptEventForEvent", testHistoryIsKeptEventForEvent},
	{"HistoryIsKeptProvisionedInOneTransaction", testHistoryIsKeptProvisionedInOneTransaction},
	{"InstantProvisionRecordsReady", testInstantProvisionRecordsReady},
	{"InstantProvisionReportsItsReadyTime", testInstantProvisionReportsItsReadyTime},
	{"InstantProvisionNeedsAnUntouchedRow", testInstantProvisionNeedsAnUntouchedRow},
	{"InstantProvisionReportsThePickersError", testInstantProvisionReportsThePickersError},
	{"InstantProvisionFencesEarlierLeases", testInstantProvisionFencesEarlierLeases},
	{"InstantProvisionOnceUnderContention", testInstantProvisionOnceUnderContention},
	{"InstantProvisionNeverOverfills", testInstantProvisionNeverOverfills},
	{"InstantProvisionSeesWhatAnotherAgentDid", testInstantProvisionSeesWhatAnotherAgentDid},
	{"ListCheckablePages", testListCheckablePages},
	{"ListCheckableSkipsOthersLeases", testListCheckableSkipsOthersLeases},
	{"ListWaitingForCapacity", testListWaitingForCapacity},
	{"CapacityHistoryAndWarnings", testCapacityHistoryAndWarnings},
	{"UnreadableRowsAreReadOneByOne", testUnreadableRowsAreReadOneByOne},
	{"RegisterAndHeartbeatAgents", testRegisterAndHeartbeatAgents},
	{"AgentSessionMovesOn", testAgentSessionMovesOn},
	{"ResignAgentGivesUpItsLeases", testResignAgentGivesUpItsLeases},
	{"AgentLivenessAndPruning", testAgentLivenessAndPruning},
	{"AgentInputsAreChecked", testAgentInputsAreChecked},
	{"DeadAgentsLeasesAreVoid", testDeadAgentsLeasesAreVoid},
	{"OverdueResources", testOverdueResources},
	{"QuietResources", testQuietResources},
	{"UnclaimedResources", testUnclaimedResources},
	{"HeartbeatRenewsTheAgentsLeases", testHeartbeatRenewsTheAgentsLeases},
	{"LeadershipIsClaimedRenewedAndResigned", testLeadershipIsClaimedRenewedAndResigned},
	{"LeadershipOfADeadOrExpiredHolderIsTaken", testLeadershipOfADeadOrExpiredHolderIsTaken},
	{"CompetingLeadershipClaimsHaveOneWinner", testCompetingLeadershipClaimsHaveOneWinner},
	{"LeadershipInputsAreChecked", testLeadershipInputsAreChecked},
	{"StaleLeadersWritesChangeNothing", testStaleLeadersWritesChangeNothing},
	{"PrunesGoByTheDatabaseClock", testPrunesGoByTheDatabaseClock},
	{"UnregisteredHoldersLeasesExpireAsBefore", testUnregisteredHoldersLeasesExpireAsBefore},
	{"ResignLogsAChangePerLease", testResignLogsAChangePerLease},
	{"HandOverLogsAChange", testHandOverLogsAChange},
	{"WritesUnderAFencedLeaseAreRefused", testWritesUnderAFencedLeaseAreRefused},
	{"SameHolderReclaimFencesTheEarlierClaim", testSameHolderReclaimFencesTheEarlierClaim},
	{"LeaselessSlotWritesYieldToALiveLease", testLeaselessSlotWritesYieldToALiveLease},
	{"ClaimReportsTakeovers", testClaimReportsTakeovers},
	{"ControlsThroughTheStore", testControlsThroughTheStore},
	{"ControlsThroughPlainSQL", testControlsThroughPlainSQL},
	{"ControlsOfAResourceBeingDeleted", testControlsOfAResourceBeingDeleted},
	{"PausedResourcesAreLeftAlone", testPausedResourcesAreLeftAlone},
	{"HibernationNeedsAttention", testHibernationNeedsAttention},
	{"ListResourcesBySelector", testListResourcesBySelector},
	{"ChangeLabelsMergesInOneWrite", testChangeLabelsMergesInOneWrite},
	{"ConcurrentLabelChangesAllLand", testConcurrentLabelChangesAllLand},
	{"StatusChangedAtFollowsTheStatus", testStatusChangedAtFollowsTheStatus},
	{"EventFeed", testEventFeed},
	{"ControlsSurviveARestart", testControlsSurviveARestart},
	{"CheckErrorsListEveryStatusAndType", testCheckErrorsListEveryStatusAndType},
	{"SchemaKeepsTypesStatusesAndKindsAsNames", testSchemaKeepsTypesStatusesAndKindsAsNames},
	{"ResourceTimesAreInUTC", testResourceTimesAreInUTC},
	{"ANewerSchemaFencesTheAgentsWrites", testANewerSchemaFencesTheAgentsWrites},
	{"MigrateRefusesANewerSchema", testMigrateRefusesANewerSchema},
	{"ReasonIsWrittenWithTheStatus", testReasonIsWrittenWithTheStatus},
	{"ClaimStartsCreatedRowsOnly", testClaimStartsCreatedRowsOnly},
	{"WaitingSinceFollowsTheReason", testWaitingSinceFollowsTheReason},
	{"DeleteRequestHasItsReason", testDeleteRequestHasItsReason},
	{"RecordHealthWritesTheReason", testRecordHealthWritesTheReason},
	{"ForgetResourceRecordsWhoAndWhatIsLeft", testForgetResourceRecordsWhoAndWhatIsLeft},
	{"ForgetWaitsForALiveLease", testForgetWaitsForALiveLease},
	{"SetProvisionerMakesAFailedResourceRetryable", testSetProvisionerMakesAFailedResourceRetryable},
	{"AgentsReportTheirProvisioners", testAgentsReportTheirProvisioners},
	{"BudgetRefillsByTheDatabaseClock", testBudgetRefillsByTheDatabaseClock},
	{"BudgetDrawsAreChecked", testBudgetDrawsAreChecked},
	{"BudgetNeverGrantsMoreThanBurstPlusRate", testBudgetNeverGrantsMoreThanBurstPlusRate},
	{"BreakerOpensForEveryAgent", testBreakerOpensForEveryAgent},
	{"BreakerGivesOneProbeAtATime", testBreakerGivesOneProbeAtATime},
	{"BreakerInputsAreChecked", testBreakerInputsAreChecked},
}

// testTimeout bounds every test's database work, so a hang fails instead of stalling.
const testTimeout = 30 * time.Second

// ttl is the lease the tests take.
const ttl = time.Minute

// missingID is a UUID no test resource has.
const missingID = "00000000-0000-4000-8000-000000000000"

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func runtime(name string) domain.NewResource {
	return domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "alice", Args: map[string]any{"slots": 1}}
}

func mustCreate(t *testing.T, st domain.ResourceStore, nr domain.NewResource) domain.Resource {
	t.Helper()
	r, err := st.CreateResource(testContext(t), nr)
	if err != nil {
		t.Fatalf("create %q: %v", nr.Name, err)
	}
	return r
}

// mustClaim claims the resource's lease for holder and returns the lease the claim holds.
func mustClaim(t *testing.T, st domain.ReconcileStore, id, holder string) domain.Lease {
	t.Helper()
	c, err := st.ClaimResource(testContext(t), id, holder, ttl)
	if err != nil {
		t.Fatalf("claim %s for %s: %v", id, holder, err)
	}
	return c.Lease
}

func mustGet(t *testing.T, b *Backend, id string) domain.Resource {
	t.Helper()
	r, err := b.GetResource(testContext(t), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return r
}

func mustExec(t *testing.T, b *Backend, query string, args ...any) int64 {
	t.Helper()
	n, err := b.Exec(testContext(t), query, args...)
	if err != nil {
		t.Fatalf("exec %q: %v", query, err)
	}
	return n
}

func latestSeq(t *testing.T, st domain.ChangeLog) int64 {
	t.Helper()
	seq, err := st.LatestChangeSeq(testContext(t))
	if err != nil {
		t.Fatalf("latest change seq: %v", err)
	}
	return seq
}

// changesSince returns the resource ids logged after seq.
func changesSince(t *testing.T, st domain.ChangeLog, seq int64) []string {
	t.Helper()
	changes, err := st.ChangesAfter(testContext(t), seq, 0)
	if err != nil {
		t.Fatalf("changes after %d: %v", seq, err)
	}
	ids := make([]string, len(changes))
	for i, c := range changes {
		ids[i] = c.ResourceID
	}
	return ids
}

func expectLeaseHeld(t *testing.T, err error, holder string) {
	t.Helper()
	var held *domain.LeaseHeldError
	if !errors.As(err, &held) || !errors.Is(err, domain.ErrLeaseHeld) {
		t.Fatalf("err = %v, want a LeaseHeldError", err)
	}
	if held.Holder != holder {
		t.Fatalf("lease held by %q, want %q", held.Holder, holder)
	}
}
