// C++ DRAM model of one NDP-DIMM for the fast harness: sparse store + DDR4 timing checker.
//
// What it is
//   A port of cosim/dram/model.py (SparseStore, TimingChecker, TimingViolation)
//   for the fast RTL harness, where a Verilated NdpCore runs "until idle" in C++
//   and must not call back into Python per DRAM command. It follows
//   cosim/dram/model.py rule for rule: the same constraints (tRCD, tRP, tRAS,
//   tRC, tRRD_S/L, tFAW, tCCD_S/L, tWR, tWTR_S/L, tRTP, tRTW, CL/CWL data-bus
//   overlap, tRFC, CMD-bus, REF-open-bank, tREFI deadline with the refresh
//   credit rule, protocol errors), the same "binding rule" choice (latest
//   earliest cycle, ties broken in the order of enum Constraint, which is the
//   Python _ORDER), the same list of other broken rules in the same order, the
//   same counters, and the same message text. The docstring of
//   cosim/dram/model.py is the specification; this file does not restate it.
//   tests/cosim/dram/test_model.py runs its per-rule tests against both
//   implementations; tests/cosim/dram/test_native.py feeds both the same long
//   random command stream and compares every decision, field and message.
//
//   A rejected command changes no state (as in Python). check_refresh, as in
//   Python, moves the checker's clock to its cycle before it checks, so it does
//   so even when it then reports a missed deadline.
//
// Errors
//   No C++ exception leaves this library: every call returns a Status. After
//   VIOLATION, violation() holds the record (command, cycle, constraint,
//   rank/bank group/bank, earliest legal cycle, detail, other broken rules) and
//   message() the text Python's TimingViolation would carry; after VALUE_ERROR
//   (API misuse: unknown command, negative cycle, going back in time, bad rank
//   for check_refresh, store range errors) message() holds the text of the
//   ValueError Python raises. The C ABI at the end of this file wraps the
//   classes for ctypes (cosim/dram/native.py).
//
// Arguments
//   Python passes anything as an index (None, a bool, a string, a huge int) and
//   the Python model reports such values as protocol errors using their repr().
//   An Arg carries that: kind NONE (Python None), INT (value), OTHER (not an
//   int) or BIGINT (an int outside int64), the last two with the repr()/str()
//   text used in messages. A C++ caller uses arg_int()/arg_none().
//
// Limits (the only differences from Python, whose ints are unbounded)
//   cycles < 2^61, timing values and max_postponed_refs <= 2^30, organisation
//   fields <= 2^30 with at most 2^20 banks in all ranks, store capacity <= 2^62.
//   Out-of-limit input is a VALUE_ERROR (or a create() error), never overflow.
//
// Build
//   cosim/dram/native.py compiles dram_model.cpp and dram_model_capi.cpp
//   with `g++ -std=c++17 -O2 -shared -fPIC` into
//   build/native/<hash of sources, flags and compiler>/libndpdram.so, once per
//   source change (file lock against concurrent pytest-xdist workers).
//   Standard library only.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>
#endif

#ifdef __cplusplus
extern "C" {
#endif

// ---- plain structs shared by the C++ classes and the C ABI ------------------------------

/// Bumped when a struct or function signature below changes.
#define NDPDRAM_ABI_VERSION 1

/// Sentinel of the simple C entry points: "argument absent" (Python None).
#define NDPDRAM_NONE INT64_MIN

enum ndpdram_status {
    NDPDRAM_OK = 0,
    NDPDRAM_VIOLATION = 1,     // a TimingViolation: see ndpdram_checker_error()
    NDPDRAM_VALUE_ERROR = 2,   // API misuse (Python raises ValueError): message only
    NDPDRAM_INTERNAL_ERROR = 3 // out of memory or a bug: message only
};

enum ndpdram_arg_kind {
    NDPDRAM_ARG_NONE = 0,   // Python None
    NDPDRAM_ARG_INT = 1,    // an int that fits int64: .value
    NDPDRAM_ARG_OTHER = 2,  // not an int (Python: a str, a bool, a float...): .repr/.str
    NDPDRAM_ARG_BIGINT = 3  // an int outside int64: .repr/.str
};

typedef struct ndpdram_arg {
    int64_t value;
    int32_t kind;           // enum ndpdram_arg_kind
    const char* repr;       // repr() text for OTHER/BIGINT (NULL otherwise)
    const char* str;        // str() text for OTHER/BIGINT (NULL: use repr)
} ndpdram_arg;

/// DramOrganization (hw/memory/dram.py): all positive powers of two, burst_bytes <= row_bytes.
typedef struct ndpdram_org {
    int64_t ranks;
    int64_t bank_groups;
    int64_t banks_per_group;
    int64_t rows_per_bank;
    int64_t row_bytes;
    int64_t burst_bytes;    // columns per row (bursts_per_row) = row_bytes / burst_bytes
} ndpdram_org;

/// DramTiming (hw/memory/dram.py) in DRAM clock cycles; tCK_ns is not needed here.
typedef struct ndpdram_timing {
    int64_t tRC, tRCD, tCL, tRP, tRAS, tBL, tCCD_S, tCCD_L, tRRD_S, tRRD_L, tFAW;
    int64_t tWR, tWTR_S, tWTR_L, tRTP, CWL, tREFI, tRFC, max_postponed_refs;
} ndpdram_timing;

/// The fixed part of a violation record; the other broken rules come from
/// ndpdram_checker_error_other(), detail and message from their getters.
typedef struct ndpdram_error {
    int32_t command;        // 0..5 = ACT RD WR PRE PREA REF, 6 = check_refresh
    int32_t constraint;     // see ndpdram_constraint_name()
    int64_t cycle;
    int32_t rank_kind, bank_group_kind, bank_kind;   // enum ndpdram_arg_kind
    int64_t rank, bank_group, bank;                  // valid when the kind is INT
    int32_t has_earliest;   // 0 for protocol, REF-open-bank and tREFI
    int64_t earliest;
    int32_t n_others;
} ndpdram_error;

#ifdef __cplusplus
}  // extern "C"

namespace ndpdram {

using Arg = ndpdram_arg;
using Organization = ndpdram_org;
using Timing = ndpdram_timing;

enum class Status : int32_t {
    OK = NDPDRAM_OK, VIOLATION = NDPDRAM_VIOLATION,
    VALUE_ERROR = NDPDRAM_VALUE_ERROR, INTERNAL_ERROR = NDPDRAM_INTERNAL_ERROR,
};

/// DRAM commands, in the order of COMMANDS in cosim/dram/model.py.
enum class Command : int32_t { ACT = 0, RD, WR, PRE, PREA, REF, CHECK_REFRESH };
constexpr int kNumCommands = 6;   // CHECK_REFRESH is not a command (it only names errors)

/// Timing rules in tie-break order (_ORDER in cosim/dram/model.py: lower wins),
/// then the rules reported before any timing rule.
enum class Constraint : int32_t {
    tRFC = 0, CMD_bus, tRC, tRP, tRAS, tRCD, tRRD_S, tRRD_L, tFAW, tCCD_S, tCCD_L,
    tWTR_S, tWTR_L, tRTW, tWR, tRTP, CL, CWL,
    protocol, REF_open_bank, tREFI,
};
constexpr int kNumConstraints = 21;

const char* command_name(int32_t command);        // "ACT" ... "REF", "check_refresh"; "?" otherwise
const char* constraint_name(int32_t constraint);  // "tRFC", "CMD-bus", ... "tREFI"; "?" otherwise

constexpr int64_t kNever = -(int64_t(1) << 60);   // "never happened" (Python _NEVER)
constexpr int64_t kMaxCycle = (int64_t(1) << 61) - 1;
constexpr int64_t kMaxTiming = int64_t(1) << 30;
constexpr int64_t kMaxOrgField = int64_t(1) << 30;
constexpr int64_t kMaxBanks = int64_t(1) << 20;      // ranks x bank groups x banks
constexpr int64_t kMaxStoreBytes = int64_t(1) << 62;

inline Arg arg_none() { return Arg{0, NDPDRAM_ARG_NONE, nullptr, nullptr}; }
inline Arg arg_int(int64_t v) { return Arg{v, NDPDRAM_ARG_INT, nullptr, nullptr}; }
/// NDPDRAM_NONE -> arg_none(), anything else -> arg_int().
inline Arg arg_opt(int64_t v) { return v == NDPDRAM_NONE ? arg_none() : arg_int(v); }

/// rank / bank group / bank of a violation, as Python's TimingViolation holds them.
struct Field {
    int32_t kind = NDPDRAM_ARG_NONE;   // NONE: Python None (omitted from the message but for rank)
    int64_t value = 0;                 // for INT
    std::string text;                  // str() of an OTHER/BIGINT argument
};

struct Violation {
    int32_t command = 0;               // Command (CHECK_REFRESH for check_refresh)
    int64_t cycle = 0;
    Constraint constraint = Constraint::protocol;
    Field rank, bank_group, bank;
    bool has_earliest = false;
    int64_t earliest = 0;
    std::string detail;
    std::vector<std::pair<Constraint, int64_t>> others;   // further broken rules, binding order
};

struct Stats {
    int64_t commands[kNumCommands] = {};   // per Command, ACT..REF
    int64_t row_hits = 0;
    int64_t row_misses = 0;
    int64_t refreshes = 0;                  // = commands[REF]
};

/// Byte store of capacity_bytes that allocates page_bytes pages on first write;
/// untouched bytes read as zero.
class SparseStore {
public:
    /// nullptr and *error set if capacity/page size are invalid (Python's ValueError text).
    static std::unique_ptr<SparseStore> create(int64_t capacity_bytes, int64_t page_bytes,
                                               std::string* error);

    /// Reads n bytes at addr into out (n bytes); the whole range is checked first.
    Status read(int64_t addr, int64_t n, uint8_t* out);
    /// Writes n bytes at addr; the whole range is checked before any byte is written.
    Status write(int64_t addr, const uint8_t* data, int64_t n);

    int64_t capacity_bytes() const { return capacity_; }
    int64_t page_bytes() const { return page_bytes_; }
    int64_t touched_bytes() const { return int64_t(pages_.size()) * page_bytes_; }
    const std::string& message() const { return message_; }

private:
    SparseStore(int64_t capacity, int64_t page_bytes);
    bool check_range(int64_t addr, int64_t n);

    int64_t capacity_, page_bytes_;
    int shift_;
    std::unordered_map<int64_t, std::unique_ptr<uint8_t[]>> pages_;
    std::string message_;
};

/// Checks a DDR4 command stream against every rule of cosim/dram/model.py.
class TimingChecker {
public:
    /// nullptr and *error set if a field is out of range.
    static std::unique_ptr<TimingChecker> create(const Organization& org, const Timing& timing,
                                                 std::string* error);

    /// Check one command and apply it if legal (Python TimingChecker.issue). command is
    /// a Command value; anything else is a VALUE_ERROR "unknown DRAM command"
    /// (command_repr, if given, names it in the message).
    Status issue(int32_t command, const Arg& cycle, const Arg& rank, const Arg& bank_group,
                 const Arg& bank, const Arg& row, const Arg& column,
                 const char* command_repr = nullptr);
    /// Convenience for C++ callers: NDPDRAM_NONE marks an absent argument.
    Status issue(int64_t cycle, Command command, int64_t rank, int64_t bank_group = NDPDRAM_NONE,
                 int64_t bank = NDPDRAM_NONE, int64_t row = NDPDRAM_NONE,
                 int64_t column = NDPDRAM_NONE);

    /// Earliest cycle >= cycle() at which the command meets every lower-bound rule
    /// (Python earliest_cycle); VIOLATION (protocol) if waiting cannot make it legal.
    Status earliest_cycle(int32_t command, const Arg& rank, const Arg& bank_group,
                          const Arg& bank, const Arg& row, const Arg& column, int64_t* out,
                          const char* command_repr = nullptr);

    /// Refresh deadline of every rank (rank NONE) or of one rank at cycle (Python check_refresh).
    Status check_refresh(const Arg& cycle, const Arg& rank);
    Status check_refresh(int64_t cycle) { return check_refresh(arg_int(cycle), arg_none()); }

    /// After VIOLATION: the record. After any error: message() is the Python text.
    const Violation& violation() const { return violation_; }
    const std::string& message() const { return message_; }

    Stats stats() const;
    int64_t cycle() const { return now_; }
    /// True and *row set if the bank has an open row; indices must be valid.
    bool open_row(int64_t rank, int64_t bank_group, int64_t bank, int64_t* row) const;
    int64_t read_data_cycle(int64_t cmd_cycle) const { return cmd_cycle + t_.tCL; }
    int64_t write_data_cycle(int64_t cmd_cycle) const { return cmd_cycle + t_.CWL; }
    const Organization& org() const { return org_; }
    const Timing& timing() const { return t_; }

private:
    struct Bank {
        bool open = false;
        int64_t open_row = 0;
        int64_t act = kNever;       // last ACT
        int64_t pre = kNever;       // last PRE/PREA that closed a row
        int64_t last_rd = kNever;   // last RD since the ACT
        int64_t last_wr = kNever;   // last WR since the ACT
        bool accessed = false;      // a RD/WR hit the open row since its ACT
    };
    struct Rank {
        std::vector<Bank> banks;              // [bank_group * banks_per_group + bank]
        std::deque<int64_t> acts;             // last 4 ACT cycles (tFAW)
        std::vector<int64_t> last_act_bg, last_col_bg, last_wr_bg;
        int64_t last_rd = kNever;
        std::deque<std::pair<int64_t, int64_t>> bursts;   // [start, end) on the data bus, by start
        int64_t ref = kNever;                 // last REF (tRFC)
        int64_t ref_base = 0;                 // last REF or cycle 0 (deadline gap)
        int64_t ref_count = 0;                // REFs credited (deadline debt)
        int64_t last_cmd = kNever;
        int64_t open_banks = 0;
    };
    using Bounds = std::vector<std::pair<Constraint, int64_t>>;

    TimingChecker(const Organization& org, const Timing& timing);
    Status value_error(std::string message);
    Status violation(int32_t command, int64_t cycle, Constraint constraint, Field rank,
                     Field bank_group, Field bank, bool has_earliest, int64_t earliest,
                     std::string detail, Bounds others);
    bool check_command(int32_t command, const char* command_repr);
    bool check_cycle(const Arg& cycle);
    bool protocol(int32_t command, int64_t cycle, const Arg& rank, const Arg& bank_group,
                  const Arg& bank, const Arg& row, const Arg& column, Rank** r, Bank** b);
    void bounds(int32_t command, const Rank& r, int64_t bank_group, const Bank* b, Bounds* out) const;
    int64_t bus_earliest(int32_t command, const Rank& r, int64_t cycle) const;
    int64_t joint_earliest(int32_t command, const Rank& r, int64_t bank_group, const Bank* b,
                           int64_t cycle);
    int64_t deadline(const Rank& r) const;
    bool check_deadline(int32_t command, const Rank& r, int64_t cycle, Field rank,
                        Field bank_group, Field bank);
    void apply(int64_t cycle, int32_t command, Rank& r, int64_t bank_group, Bank* b, int64_t row);

    Organization org_;
    Timing t_;
    int64_t bursts_per_row_;
    std::vector<Rank> ranks_;
    int64_t now_ = 0;
    Stats stats_;
    Violation violation_;
    std::string message_;
    Bounds scratch_;   // reused by bounds() callers so the hot path does not allocate
};

/// str() of a Violation exactly as Python's TimingViolation formats it.
std::string format_violation(const Violation& v);

}  // namespace ndpdram

extern "C" {
#endif  // __cplusplus

// ---- C ABI (dram_model_capi.cpp) ------------------------------------------------------------
// Handles are opaque. Every function catches everything: no C++ exception crosses it.
// Strings returned stay valid until the next call on the same handle.

typedef struct ndpdram_checker ndpdram_checker;
typedef struct ndpdram_store ndpdram_store;

int32_t ndpdram_abi_version(void);
const char* ndpdram_command_name(int32_t command);
const char* ndpdram_constraint_name(int32_t constraint);
int32_t ndpdram_num_constraints(void);

/// NULL on invalid input, with the reason in err (errlen bytes, NUL-terminated).
ndpdram_checker* ndpdram_checker_create(const ndpdram_org* org, const ndpdram_timing* timing,
                                        char* err, size_t errlen);
void ndpdram_checker_destroy(ndpdram_checker* h);

/// Returns enum ndpdram_status. The simple forms take NDPDRAM_NONE for absent arguments.
int32_t ndpdram_checker_issue(ndpdram_checker* h, int32_t command, int64_t cycle, int64_t rank,
                              int64_t bank_group, int64_t bank, int64_t row, int64_t column);
/// args = {rank, bank_group, bank, row, column}; command_repr names an unknown command.
int32_t ndpdram_checker_issue_args(ndpdram_checker* h, int32_t command, const char* command_repr,
                                   const ndpdram_arg* cycle, const ndpdram_arg* args);
int32_t ndpdram_checker_earliest(ndpdram_checker* h, int32_t command, int64_t rank,
                                 int64_t bank_group, int64_t bank, int64_t row, int64_t column,
                                 int64_t* out);
int32_t ndpdram_checker_earliest_args(ndpdram_checker* h, int32_t command, const char* command_repr,
                                      const ndpdram_arg* args, int64_t* out);
/// rank NDPDRAM_NONE: every rank.
int32_t ndpdram_checker_check_refresh(ndpdram_checker* h, int64_t cycle, int64_t rank);
int32_t ndpdram_checker_check_refresh_args(ndpdram_checker* h, const ndpdram_arg* cycle,
                                           const ndpdram_arg* rank);

/// After NDPDRAM_VIOLATION: the record; returns 0, or -1 if the last call was no violation.
int32_t ndpdram_checker_error(const ndpdram_checker* h, ndpdram_error* out);
/// i-th other broken rule (0 <= i < n_others): returns 0, or -1 if out of range.
int32_t ndpdram_checker_error_other(const ndpdram_checker* h, int32_t i, int32_t* constraint,
                                    int64_t* earliest);
/// Text of the rank/bank_group/bank field (which = 0/1/2) of an OTHER/BIGINT argument.
const char* ndpdram_checker_error_field_text(const ndpdram_checker* h, int32_t which);
const char* ndpdram_checker_error_detail(const ndpdram_checker* h);
/// The error message of the last failed call (the text Python's exception carries).
const char* ndpdram_checker_error_message(const ndpdram_checker* h);

/// out[0..5] commands per type (ACT RD WR PRE PREA REF), out[6] row hits, out[7] row
/// misses, out[8] refreshes.
void ndpdram_checker_stats(const ndpdram_checker* h, int64_t out[9]);
int64_t ndpdram_checker_cycle(const ndpdram_checker* h);
/// 1 and *row if open, 0 if closed, -1 if an index is out of range.
int32_t ndpdram_checker_open_row(const ndpdram_checker* h, int64_t rank, int64_t bank_group,
                                 int64_t bank, int64_t* row);

ndpdram_store* ndpdram_store_create(int64_t capacity_bytes, int64_t page_bytes, char* err,
                                    size_t errlen);
void ndpdram_store_destroy(ndpdram_store* s);
/// Return enum ndpdram_status; the message of a failure from ndpdram_store_error_message().
int32_t ndpdram_store_read(ndpdram_store* s, int64_t addr, int64_t n, uint8_t* out);
int32_t ndpdram_store_write(ndpdram_store* s, int64_t addr, const uint8_t* data, int64_t n);
int64_t ndpdram_store_touched_bytes(const ndpdram_store* s);
const char* ndpdram_store_error_message(const ndpdram_store* s);

#ifdef __cplusplus
}  // extern "C"
#endif
