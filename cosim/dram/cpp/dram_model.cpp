// C++ DRAM model: SparseStore and TimingChecker. See dram_model.h; the rules are those
// of cosim/dram/model.py, and each function below names the Python one it follows.
#include "dram_model.h"

#include <algorithm>
#include <cstring>

namespace ndpdram {

namespace {

const char* const kCommandNames[] = {"ACT", "RD", "WR", "PRE", "PREA", "REF", "check_refresh"};
const char* const kConstraintNames[] = {
    "tRFC", "CMD-bus", "tRC", "tRP", "tRAS", "tRCD", "tRRD_S", "tRRD_L", "tFAW", "tCCD_S",
    "tCCD_L", "tWTR_S", "tWTR_L", "tRTW", "tWR", "tRTP", "CL", "CWL",
    "protocol", "REF-open-bank", "tREFI",
};
static_assert(sizeof(kConstraintNames) / sizeof(kConstraintNames[0]) == kNumConstraints,
              "constraint names out of step with enum Constraint");

constexpr int32_t ACT = int32_t(Command::ACT), RD = int32_t(Command::RD),
                  WR = int32_t(Command::WR), PRE = int32_t(Command::PRE),
                  PREA = int32_t(Command::PREA), REF = int32_t(Command::REF),
                  CHECK_REFRESH = int32_t(Command::CHECK_REFRESH);

std::string dec(int64_t v) { return std::to_string(v); }

// Python repr() / str() of an argument.
std::string repr_of(const Arg& a) {
    switch (a.kind) {
        case NDPDRAM_ARG_NONE: return "None";
        case NDPDRAM_ARG_INT: return dec(a.value);
        default: return a.repr ? a.repr : "?";
    }
}

std::string str_of(const Arg& a) {
    if ((a.kind == NDPDRAM_ARG_OTHER || a.kind == NDPDRAM_ARG_BIGINT) && a.str) return a.str;
    return repr_of(a);
}

Field field_of(const Arg& a) {
    Field f;
    f.kind = a.kind;
    if (a.kind == NDPDRAM_ARG_INT) f.value = a.value;
    else if (a.kind != NDPDRAM_ARG_NONE) f.text = str_of(a);
    return f;
}

Field int_field(int64_t v) {
    Field f;
    f.kind = NDPDRAM_ARG_INT;
    f.value = v;
    return f;
}

std::string field_str(const Field& f) {
    switch (f.kind) {
        case NDPDRAM_ARG_NONE: return "None";
        case NDPDRAM_ARG_INT: return dec(f.value);
        default: return f.text;
    }
}

// Python's _is_int(v) and 0 <= v < n.
bool in_range(const Arg& a, int64_t n) {
    return a.kind == NDPDRAM_ARG_INT && a.value >= 0 && a.value < n;
}

// Python format(v, "#x").
std::string hex_py(__int128 v) {
    bool neg = v < 0;
    unsigned __int128 u = neg ? (unsigned __int128)(-v) : (unsigned __int128)v;
    std::string digits;
    do {
        digits.push_back("0123456789abcdef"[int(u & 15)]);
        u >>= 4;
    } while (u);
    std::reverse(digits.begin(), digits.end());
    return (neg ? "-0x" : "0x") + digits;
}

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

const char* command_name(int32_t command) {
    return command >= 0 && command <= CHECK_REFRESH ? kCommandNames[command] : "?";
}

const char* constraint_name(int32_t constraint) {
    return constraint >= 0 && constraint < kNumConstraints ? kConstraintNames[constraint] : "?";
}

// TimingViolation.__init__ of cosim/dram/model.py.
std::string format_violation(const Violation& v) {
    std::string where = "rank " + field_str(v.rank);
    if (v.bank_group.kind != NDPDRAM_ARG_NONE) where += " bank group " + field_str(v.bank_group);
    if (v.bank.kind != NDPDRAM_ARG_NONE) where += " bank " + field_str(v.bank);
    std::string msg = std::string(command_name(v.command)) + " at cycle " + dec(v.cycle) +
                      " violates " + constraint_name(int32_t(v.constraint)) + " on " + where;
    if (v.has_earliest) msg += ": earliest legal cycle is " + dec(v.earliest);
    else msg += ": waiting alone does not make it legal";
    if (!v.detail.empty()) msg += " (" + v.detail + ")";
    if (!v.others.empty()) {
        msg += "; also violates ";
        for (size_t i = 0; i < v.others.size(); ++i) {
            if (i) msg += ", ";
            msg += std::string(constraint_name(int32_t(v.others[i].first))) + " (earliest " +
                   dec(v.others[i].second) + ")";
        }
    }
    return msg;
}

// ---- SparseStore ------------------------------------------------------------------------------

std::unique_ptr<SparseStore> SparseStore::create(int64_t capacity_bytes, int64_t page_bytes,
                                                 std::string* error) {
    std::string err;
    if (capacity_bytes <= 0)
        err = "capacity_bytes must be a positive int, got " + dec(capacity_bytes);
    else if (capacity_bytes > kMaxStoreBytes)
        err = "capacity_bytes " + dec(capacity_bytes) + " exceeds the native store's limit of " +
              dec(kMaxStoreBytes);
    else if (!is_pow2(page_bytes))
        err = "page_bytes must be a positive power of two, got " + dec(page_bytes);
    if (!err.empty()) {
        if (error) *error = err;
        return nullptr;
    }
    return std::unique_ptr<SparseStore>(new SparseStore(capacity_bytes, page_bytes));
}

SparseStore::SparseStore(int64_t capacity, int64_t page_bytes)
    : capacity_(capacity), page_bytes_(page_bytes), shift_(0) {
    while ((int64_t(1) << shift_) < page_bytes) ++shift_;
}

// Python SparseStore._check_range (the type check is the wrapper's: C has only ints).
bool SparseStore::check_range(int64_t addr, int64_t n) {
    if (n < 0) {
        message_ = "length must be >= 0, got " + dec(n);
        return false;
    }
    if (addr < 0 || (__int128)addr + n > capacity_) {
        message_ = "range [" + hex_py(addr) + ", " + hex_py((__int128)addr + n) +
                   ") is outside the store (0.." + hex_py(capacity_) + ")";
        return false;
    }
    return true;
}

Status SparseStore::read(int64_t addr, int64_t n, uint8_t* out) {
    if (!check_range(addr, n)) return Status::VALUE_ERROR;
    if (n && !out) {
        message_ = "read: no output buffer";
        return Status::INTERNAL_ERROR;
    }
    if (n) std::memset(out, 0, size_t(n));
    for (int64_t pos = 0; pos < n;) {
        int64_t a = addr + pos, off = a & (page_bytes_ - 1);
        int64_t chunk = std::min(n - pos, page_bytes_ - off);
        auto it = pages_.find(a >> shift_);
        if (it != pages_.end()) std::memcpy(out + pos, it->second.get() + off, size_t(chunk));
        pos += chunk;
    }
    return Status::OK;
}

Status SparseStore::write(int64_t addr, const uint8_t* data, int64_t n) {
    if (!check_range(addr, n)) return Status::VALUE_ERROR;
    if (n && !data) {
        message_ = "write: no data";
        return Status::INTERNAL_ERROR;
    }
    for (int64_t pos = 0; pos < n;) {
        int64_t a = addr + pos, off = a & (page_bytes_ - 1);
        int64_t chunk = std::min(n - pos, page_bytes_ - off);
        auto& page = pages_[a >> shift_];
        if (!page) page.reset(new uint8_t[size_t(page_bytes_)]());
        std::memcpy(page.get() + off, data + pos, size_t(chunk));
        pos += chunk;
    }
    return Status::OK;
}

// ---- TimingChecker ----------------------------------------------------------------------------

std::unique_ptr<TimingChecker> TimingChecker::create(const Organization& org, const Timing& t,
                                                     std::string* error) {
    std::string err;
    const std::pair<const char*, int64_t> org_fields[] = {
        {"ranks", org.ranks}, {"bank_groups", org.bank_groups},
        {"banks_per_group", org.banks_per_group}, {"rows_per_bank", org.rows_per_bank},
        {"row_bytes", org.row_bytes}, {"burst_bytes", org.burst_bytes},
    };
    for (const auto& f : org_fields) {
        if (!is_pow2(f.second) || f.second > kMaxOrgField) {
            err = std::string(f.first) + " must be a power of two in 1.." + dec(kMaxOrgField) +
                  " for the native checker, got " + dec(f.second);
            break;
        }
    }
    if (err.empty() && org.burst_bytes > org.row_bytes)
        err = "burst_bytes (" + dec(org.burst_bytes) + ") must not exceed row_bytes (" +
              dec(org.row_bytes) + ")";
    // each field <= 2^30 here, so the product cannot overflow before the comparison
    if (err.empty() && (__int128)org.ranks * org.bank_groups * org.banks_per_group > kMaxBanks)
        err = "the native checker supports at most " + dec(kMaxBanks) + " banks in all ranks, got " +
              dec(org.ranks) + " x " + dec(org.bank_groups) + " x " + dec(org.banks_per_group);
    const std::pair<const char*, int64_t> timing_fields[] = {
        {"tRC", t.tRC}, {"tRCD", t.tRCD}, {"tCL", t.tCL}, {"tRP", t.tRP}, {"tRAS", t.tRAS},
        {"tBL", t.tBL}, {"tCCD_S", t.tCCD_S}, {"tCCD_L", t.tCCD_L}, {"tRRD_S", t.tRRD_S},
        {"tRRD_L", t.tRRD_L}, {"tFAW", t.tFAW}, {"tWR", t.tWR}, {"tWTR_S", t.tWTR_S},
        {"tWTR_L", t.tWTR_L}, {"tRTP", t.tRTP}, {"CWL", t.CWL}, {"tREFI", t.tREFI},
        {"tRFC", t.tRFC}, {"max_postponed_refs", t.max_postponed_refs},
    };
    for (const auto& f : timing_fields) {
        if (!err.empty()) break;
        if (f.second < 1 || f.second > kMaxTiming)
            err = std::string(f.first) + " must be in 1.." + dec(kMaxTiming) +
                  " for the native checker, got " + dec(f.second);
    }
    if (!err.empty()) {
        if (error) *error = err;
        return nullptr;
    }
    return std::unique_ptr<TimingChecker>(new TimingChecker(org, t));
}

TimingChecker::TimingChecker(const Organization& org, const Timing& timing)
    : org_(org), t_(timing), bursts_per_row_(org.row_bytes / org.burst_bytes) {
    ranks_.resize(size_t(org.ranks));
    for (Rank& r : ranks_) {
        r.banks.resize(size_t(org.bank_groups * org.banks_per_group));
        r.last_act_bg.assign(size_t(org.bank_groups), kNever);
        r.last_col_bg.assign(size_t(org.bank_groups), kNever);
        r.last_wr_bg.assign(size_t(org.bank_groups), kNever);
    }
}

Status TimingChecker::value_error(std::string message) {
    message_ = std::move(message);
    return Status::VALUE_ERROR;
}

Status TimingChecker::violation(int32_t command, int64_t cycle, Constraint constraint, Field rank,
                                Field bank_group, Field bank, bool has_earliest, int64_t earliest,
                                std::string detail, Bounds others) {
    Violation& v = violation_;
    v.command = command;
    v.cycle = cycle;
    v.constraint = constraint;
    v.rank = std::move(rank);
    v.bank_group = std::move(bank_group);
    v.bank = std::move(bank);
    v.has_earliest = has_earliest;
    v.earliest = has_earliest ? earliest : 0;
    v.detail = std::move(detail);
    v.others = std::move(others);
    message_ = format_violation(v);
    return Status::VIOLATION;
}

bool TimingChecker::check_command(int32_t command, const char* command_repr) {
    if (command >= 0 && command < kNumCommands) return true;
    value_error("unknown DRAM command " + (command_repr ? std::string(command_repr) : dec(command)) +
                ": expected one of ACT, RD, WR, PRE, PREA, REF");
    return false;
}

// The cycle checks of Python issue() and _advance() (plus the native limit).
bool TimingChecker::check_cycle(const Arg& cycle) {
    if (cycle.kind == NDPDRAM_ARG_INT && cycle.value >= 0 && cycle.value <= kMaxCycle) return true;
    bool big = (cycle.kind == NDPDRAM_ARG_INT && cycle.value > kMaxCycle) ||
               (cycle.kind == NDPDRAM_ARG_BIGINT && cycle.repr && cycle.repr[0] != '-');
    if (big)
        value_error("cycle " + repr_of(cycle) + " exceeds the native checker's limit of " +
                    dec(kMaxCycle));
    else
        value_error("cycle must be a non-negative int, got " + repr_of(cycle));
    return false;
}

// Python TimingChecker._protocol: false (and the violation recorded) on a protocol error.
bool TimingChecker::protocol(int32_t command, int64_t cycle, const Arg& rank, const Arg& bank_group,
                             const Arg& bank, const Arg& row, const Arg& column, Rank** r, Bank** b) {
    auto bad = [&](std::string detail) {
        violation(command, cycle, Constraint::protocol, field_of(rank), field_of(bank_group),
                  field_of(bank), false, 0, std::move(detail), {});
        return false;
    };
    if (!in_range(rank, org_.ranks))
        return bad("rank " + repr_of(rank) + " is outside 0.." + dec(org_.ranks - 1));
    *r = &ranks_[size_t(rank.value)];
    *b = nullptr;
    if (command == PREA || command == REF) return true;
    if (!in_range(bank_group, org_.bank_groups))
        return bad("bank group " + repr_of(bank_group) + " is outside 0.." + dec(org_.bank_groups - 1));
    if (!in_range(bank, org_.banks_per_group))
        return bad("bank " + repr_of(bank) + " is outside 0.." + dec(org_.banks_per_group - 1));
    if (row.kind != NDPDRAM_ARG_NONE && !in_range(row, org_.rows_per_bank))
        return bad("row " + repr_of(row) + " is outside 0.." + dec(org_.rows_per_bank - 1));
    if (column.kind != NDPDRAM_ARG_NONE && !in_range(column, bursts_per_row_))
        return bad("column " + repr_of(column) + " is outside 0.." + dec(bursts_per_row_ - 1));
    Bank& x = (*r)->banks[size_t(bank_group.value * org_.banks_per_group + bank.value)];
    if (command == ACT) {
        if (row.kind == NDPDRAM_ARG_NONE) return bad("ACT needs a row");
        if (x.open) return bad("bank already has row " + dec(x.open_row) + " open");
    } else if (command == RD || command == WR) {
        if (!x.open) return bad("bank is closed");
        if (row.kind != NDPDRAM_ARG_NONE && row.value != x.open_row)
            return bad("row " + dec(row.value) + " is not the open row " + dec(x.open_row));
    }
    *b = &x;
    return true;
}

// Python TimingChecker._bounds: every lower-bound rule, in the same order.
void TimingChecker::bounds(int32_t command, const Rank& r, int64_t g, const Bank* b,
                           Bounds* out) const {
    const Timing& t = t_;
    out->clear();
    out->emplace_back(Constraint::tRFC, r.ref + t.tRFC);
    out->emplace_back(Constraint::CMD_bus, r.last_cmd + 1);
    // max over the bank groups other than g; false if there is none
    auto max_other = [&](const std::vector<int64_t>& per_bg, int64_t* m) {
        bool any = false;
        for (size_t i = 0; i < per_bg.size(); ++i) {
            if (int64_t(i) == g) continue;
            *m = any ? std::max(*m, per_bg[i]) : per_bg[i];
            any = true;
        }
        return any;
    };
    int64_t m = 0;
    if (command == ACT) {
        out->emplace_back(Constraint::tRC, b->act + t.tRC);
        out->emplace_back(Constraint::tRP, b->pre + t.tRP);
        out->emplace_back(Constraint::tRRD_L, r.last_act_bg[size_t(g)] + t.tRRD_L);
        if (max_other(r.last_act_bg, &m)) out->emplace_back(Constraint::tRRD_S, m + t.tRRD_S);
        if (r.acts.size() == 4) out->emplace_back(Constraint::tFAW, r.acts[0] + t.tFAW);
    } else if (command == RD || command == WR) {
        out->emplace_back(Constraint::tRCD, b->act + t.tRCD);
        out->emplace_back(Constraint::tCCD_L, r.last_col_bg[size_t(g)] + t.tCCD_L);
        if (max_other(r.last_col_bg, &m)) out->emplace_back(Constraint::tCCD_S, m + t.tCCD_S);
        if (command == RD) {
            out->emplace_back(Constraint::tWTR_L, r.last_wr_bg[size_t(g)] + t.CWL + t.tBL + t.tWTR_L);
            if (max_other(r.last_wr_bg, &m))
                out->emplace_back(Constraint::tWTR_S, m + t.CWL + t.tBL + t.tWTR_S);
        } else {
            out->emplace_back(Constraint::tRTW, r.last_rd + (t.tCL + t.tBL + 2 - t.CWL));
        }
    } else if (command == PRE || command == PREA) {
        auto add = [&](const Bank& x) {
            if (!x.open) return;
            out->emplace_back(Constraint::tRAS, x.act + t.tRAS);
            out->emplace_back(Constraint::tRTP, x.last_rd + t.tRTP);
            out->emplace_back(Constraint::tWR, x.last_wr + (t.CWL + t.tBL + t.tWR));
        };
        if (command == PRE) add(*b);
        else for (const Bank& x : r.banks) add(x);          // bank-group-major, as in Python
    } else if (command == REF) {
        int64_t latest = kNever;
        bool first = true;
        for (const Bank& x : r.banks) {
            latest = first ? x.pre : std::max(latest, x.pre);
            first = false;
        }
        out->emplace_back(Constraint::tRP, latest + t.tRP);
    }
}

// Python TimingChecker._bus_earliest.
int64_t TimingChecker::bus_earliest(int32_t command, const Rank& r, int64_t cycle) const {
    const int64_t lat = command == RD ? t_.tCL : t_.CWL, bl = t_.tBL;
    int64_t c = cycle;
    bool moved = true;
    while (moved) {
        moved = false;
        for (const auto& burst : r.bursts) {
            if (burst.first < c + lat + bl && c + lat < burst.second) {
                c = burst.second - lat;
                moved = true;
            }
        }
    }
    return c;
}

// Python TimingChecker._joint_earliest.
int64_t TimingChecker::joint_earliest(int32_t command, const Rank& r, int64_t g, const Bank* b,
                                      int64_t cycle) {
    bounds(command, r, g, b, &scratch_);
    int64_t c = cycle;
    for (const auto& x : scratch_) c = std::max(c, x.second);
    if (command == RD || command == WR) c = bus_earliest(command, r, c);
    return c;
}

// Python TimingChecker._deadline.
int64_t TimingChecker::deadline(const Rank& r) const {
    return std::min(r.ref_base + (t_.max_postponed_refs + 1) * t_.tREFI,
                    (r.ref_count + t_.max_postponed_refs + 1) * t_.tREFI);
}

// Python TimingChecker._check_deadline.
bool TimingChecker::check_deadline(int32_t command, const Rank& r, int64_t cycle, Field rank,
                                   Field bank_group, Field bank) {
    int64_t d = deadline(r);
    if (cycle <= d) return true;
    violation(command, cycle, Constraint::tREFI, std::move(rank), std::move(bank_group),
              std::move(bank), false, 0,
              "refresh deadline was cycle " + dec(d) + ": " + dec(r.ref_count) +
                  " REFs credited, last REF or start at cycle " + dec(r.ref_base) + ", at most " +
                  dec(t_.max_postponed_refs) + " postponed (tREFI " + dec(t_.tREFI) + ")",
              {});
    return false;
}

// Python TimingChecker.earliest_cycle.
Status TimingChecker::earliest_cycle(int32_t command, const Arg& rank, const Arg& bank_group,
                                     const Arg& bank, const Arg& row, const Arg& column,
                                     int64_t* out, const char* command_repr) {
    if (!check_command(command, command_repr)) return Status::VALUE_ERROR;
    Rank* r = nullptr;
    Bank* b = nullptr;
    if (!protocol(command, now_, rank, bank_group, bank, row, column, &r, &b))
        return Status::VIOLATION;
    int64_t g = bank_group.kind == NDPDRAM_ARG_INT ? bank_group.value : 0;
    *out = joint_earliest(command, *r, g, b, now_);
    return Status::OK;
}

// Python TimingChecker.check_refresh (with _advance).
Status TimingChecker::check_refresh(const Arg& cycle, const Arg& rank) {
    if (!check_cycle(cycle)) return Status::VALUE_ERROR;
    if (cycle.value < now_)
        return value_error("cycle " + dec(cycle.value) + " goes back in time (last command at cycle " +
                           dec(now_) + ")");
    now_ = cycle.value;
    if (rank.kind != NDPDRAM_ARG_NONE && !in_range(rank, org_.ranks))
        return value_error("rank " + repr_of(rank) + " is outside 0.." + dec(org_.ranks - 1));
    int64_t first = rank.kind == NDPDRAM_ARG_NONE ? 0 : rank.value;
    int64_t last = rank.kind == NDPDRAM_ARG_NONE ? org_.ranks - 1 : rank.value;
    for (int64_t i = first; i <= last; ++i) {
        if (!check_deadline(CHECK_REFRESH, ranks_[size_t(i)], now_, int_field(i), Field(), Field()))
            return Status::VIOLATION;
    }
    return Status::OK;
}

// Python TimingChecker.issue.
Status TimingChecker::issue(int32_t command, const Arg& cycle, const Arg& rank,
                            const Arg& bank_group, const Arg& bank, const Arg& row,
                            const Arg& column, const char* command_repr) {
    if (!check_command(command, command_repr)) return Status::VALUE_ERROR;
    if (!check_cycle(cycle)) return Status::VALUE_ERROR;
    const int64_t c = cycle.value;
    if (c < now_)
        return value_error("cycle " + dec(c) + " goes back in time (last command at cycle " +
                           dec(now_) + ")");
    Rank* r = nullptr;
    Bank* b = nullptr;
    if (!protocol(command, c, rank, bank_group, bank, row, column, &r, &b)) return Status::VIOLATION;
    if (command == REF && r->open_banks) {
        std::string open = "[";
        for (int64_t g = 0; g < org_.bank_groups; ++g) {
            for (int64_t i = 0; i < org_.banks_per_group; ++i) {
                if (!r->banks[size_t(g * org_.banks_per_group + i)].open) continue;
                if (open.size() > 1) open += ", ";
                open += "(" + dec(g) + ", " + dec(i) + ")";
            }
        }
        open += "]";
        return violation(command, c, Constraint::REF_open_bank, field_of(rank), Field(), Field(),
                         false, 0, "open (bank group, bank): " + open, {});
    }
    if (!check_deadline(command, *r, c, field_of(rank), field_of(bank_group),
                        field_of(bank)))
        return Status::VIOLATION;
    const int64_t g = bank_group.kind == NDPDRAM_ARG_INT ? bank_group.value : 0;  // ACT/RD/WR only
    bounds(command, *r, g, b, &scratch_);
    Bounds violated;                                // (joint_earliest reuses scratch_)
    for (const auto& x : scratch_)
        if (c < x.second) violated.push_back(x);
    if (command == RD || command == WR) {
        int64_t e = bus_earliest(command, *r, c);
        if (e != c) violated.emplace_back(command == RD ? Constraint::CL : Constraint::CWL, e);
    }
    if (!violated.empty()) {
        // Python: violated.sort(key=lambda v: (-v[1], _RANK_OF[v[0]])), a stable sort.
        std::stable_sort(violated.begin(), violated.end(), [](const auto& a, const auto& b2) {
            return a.second != b2.second ? a.second > b2.second : a.first < b2.first;
        });
        Constraint name = violated[0].first;
        int64_t earliest = joint_earliest(command, *r, g, b, c);
        violated.erase(violated.begin());
        return violation(command, c, name, field_of(rank), field_of(bank_group), field_of(bank),
                         true, earliest, "", std::move(violated));
    }
    now_ = c;
    apply(c, command, *r, g, b, row.kind == NDPDRAM_ARG_INT ? row.value : 0);
    return Status::OK;
}

Status TimingChecker::issue(int64_t cycle, Command command, int64_t rank, int64_t bank_group,
                            int64_t bank, int64_t row, int64_t column) {
    return issue(int32_t(command), arg_int(cycle), arg_opt(rank), arg_opt(bank_group),
                 arg_opt(bank), arg_opt(row), arg_opt(column));
}

// Python TimingChecker._apply.
void TimingChecker::apply(int64_t cycle, int32_t command, Rank& r, int64_t g, Bank* b, int64_t row) {
    const Timing& t = t_;
    stats_.commands[command] += 1;
    r.last_cmd = cycle;
    if (command == ACT) {
        b->open = true;
        b->open_row = row;
        b->act = cycle;
        b->last_rd = b->last_wr = kNever;
        b->accessed = false;
        r.acts.push_back(cycle);
        if (r.acts.size() > 4) r.acts.pop_front();
        r.last_act_bg[size_t(g)] = cycle;
        r.open_banks += 1;
    } else if (command == RD || command == WR) {
        if (b->accessed) {
            stats_.row_hits += 1;
        } else {
            stats_.row_misses += 1;
            b->accessed = true;
        }
        r.last_col_bg[size_t(g)] = cycle;
        int64_t start;
        if (command == RD) {
            b->last_rd = r.last_rd = cycle;
            start = cycle + t.tCL;
        } else {
            b->last_wr = r.last_wr_bg[size_t(g)] = cycle;
            start = cycle + t.CWL;
        }
        // Drop bursts no new command can reach (new data starts >= cycle + min latency).
        const int64_t horizon = cycle + std::min(t.tCL, t.CWL);
        while (!r.bursts.empty() && r.bursts.front().second <= horizon) r.bursts.pop_front();
        r.bursts.emplace_back(start, start + t.tBL);
        const size_t n = r.bursts.size();
        if (n > 1 && r.bursts[n - 2].first > start)        // WR data before an earlier RD's
            std::sort(r.bursts.begin(), r.bursts.end());
    } else if (command == PRE || command == PREA) {
        auto close = [&](Bank& x) {
            if (!x.open) return;
            x.open = false;
            x.pre = cycle;
            r.open_banks -= 1;
        };
        if (command == PRE) close(*b);
        else for (Bank& x : r.banks) close(x);
    } else if (command == REF) {
        r.ref = r.ref_base = cycle;
        // A REF more than max_postponed_refs intervals ahead of its due time earns no credit.
        r.ref_count = std::min(r.ref_count + 1, cycle / t.tREFI + t.max_postponed_refs);
    }
}

Stats TimingChecker::stats() const {
    Stats s = stats_;
    s.refreshes = s.commands[REF];
    return s;
}

bool TimingChecker::open_row(int64_t rank, int64_t bank_group, int64_t bank, int64_t* row) const {
    const Bank& x = ranks_[size_t(rank)].banks[size_t(bank_group * org_.banks_per_group + bank)];
    if (x.open && row) *row = x.open_row;
    return x.open;
}

}  // namespace ndpdram
