// `etcdlock/prometheus` as an ES module: the same functions as prometheus.js.
import cjs from './prometheus.js';

export const { register, parse } = cjs;
export default cjs;
