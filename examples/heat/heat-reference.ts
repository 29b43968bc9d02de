// `npm run heat:reference -- --rows R --cols C --steps S`: the heat stencil's sequential
// reference (heat-core.ts heatReference), printed as the same JSON line rank 0 of heat.ts prints,
// so a run on a cluster, with or without failures, can be compared with it bit for bit.
import { intOption, refuse } from '../common/options.ts';
import { checkHeatParams, heatReference, MAX_HEAT_CELLS, MAX_HEAT_STEPS, type HeatParams } from './heat-core.ts';
import { heatSummary } from './heat-state.ts';
import { helpFromHeader } from '../common/help.ts';

helpFromHeader(import.meta.url);

const PROGRAM = 'heat-reference';
const params: HeatParams = {
  rows: intOption(PROGRAM, 'rows', 'HEAT_ROWS', 64, MAX_HEAT_CELLS),
  cols: intOption(PROGRAM, 'cols', 'HEAT_COLS', 8192, MAX_HEAT_CELLS),
  steps: intOption(PROGRAM, 'steps', 'HEAT_STEPS', 100, MAX_HEAT_STEPS),
};
const problem = checkHeatParams(params, 1);
if (problem !== null) refuse(PROGRAM, problem);
const ref = heatReference(params);
process.stdout.write(`${JSON.stringify(heatSummary(params, ref.grid, ref.residuals))}\n`);
