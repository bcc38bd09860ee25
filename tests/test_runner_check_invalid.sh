#!/bin/sh
# run_scenarios --check refuses invalid fault objects before anything starts:
# exit 2, one FILE:LINE error per fault (with a "did you mean").
set -u
RS=$1 FILE=$2
out=$("$RS" --check "$FILE" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 2 ] || { echo "FAIL: exit $rc, expected 2"; exit 1; }
for want in \
  ":6: learners[0].faults[0].task: unknown task 'learner_learn_tsak' (did you mean 'learner_learn_task'?)" \
  ":7: learners[0].faults[1].wehn: unknown key for kind crash (did you mean 'when'?)" \
  ":8: learners[0].faults[2].kind: unknown kind 'crsh' (did you mean 'crash'?)" \
  ":9: learners[0].faults[3].task: no task 'my_own_task' is sent" \
  ":10: learners[0].faults[4].ms: '1.5 s' is not a duration" \
  ":14: operator.faults[0].kind: fault kind \"error_stauts\" is unknown (did you mean 'error_status'?)" \
  ":16: actions[0].on: must be an object such as {\"event\": \"learner_task\"" \
  ":17: actions[1].fault.cuont: unknown fault field \"cuont\" (did you mean 'count'?)"; do
  case $out in
    *"$want"*) ;;
    *) echo "FAIL: no error '$want'"; exit 1 ;;
  esac
done
echo "1 passed, 0 failed"
